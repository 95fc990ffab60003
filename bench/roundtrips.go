package main

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// tripCounter is a go-redis hook that counts round trips: one per command, one
// per pipeline. A script that the server answers NOSCRIPT counts twice, as it
// costs (EVALSHA, then EVAL). Pub/sub connections bypass hooks, so the
// SUBSCRIBE of a leasekit waiter is not counted: it goes on the Locker's
// subscription connection, once while the Locker has waiters.
type tripCounter struct{ n atomic.Int64 }

func countTrips(client *redis.Client) *tripCounter {
	t := &tripCounter{}
	client.AddHook(t)
	return t
}

func (t *tripCounter) load() int64 { return t.n.Load() }

func (t *tripCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (t *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		t.n.Add(1)
		return next(ctx, cmd)
	}
}

func (t *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		t.n.Add(1)
		return next(ctx, cmds)
	}
}

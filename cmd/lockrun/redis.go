package main

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// pingTimeout bounds the first contact with Redis, so that an unreachable
// server is reported at once rather than at the first lock operation.
const pingTimeout = 3 * time.Second

// quietRedis discards go-redis's own log lines (a failed dial, once per
// retry): lockrun reports the failure once, in its own words.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// connect returns a client of the Redis in opts once it has answered PING.
func connect(ctx context.Context, opts *redis.Options) (*redis.Client, error) {
	client := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, exitf(exitUnavailable, "cannot reach Redis at %s: %w", address(opts), err)
	}
	return client, nil
}

// address names the Redis in opts for a message: host and port (or socket),
// database and TLS, never the user name or password.
func address(opts *redis.Options) string {
	a := opts.Addr
	if opts.DB != 0 {
		a += " db " + strconv.Itoa(opts.DB)
	}
	if opts.TLSConfig != nil {
		a += " (TLS)"
	}
	return a
}

// unavailable reports a Redis failure after the first PING.
func unavailable(opts *redis.Options, err error) error {
	return exitf(exitUnavailable, "Redis at %s failed: %w", address(opts), err)
}

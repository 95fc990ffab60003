package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/redis/go-redis/v9"
)

// printStatus prints whether the lock is held, for how long, and the last
// fencing token granted for it, in one round trip. It never reads the lock's
// value: that is the holder's owner id, which would let anyone release the
// lock.
func printStatus(ctx context.Context, client *redis.Client, cfg config, out io.Writer) error {
	key := lease.LockKey(cfg.prefix, cfg.name)
	pipe := client.Pipeline()
	pttl := pipe.PTTL(ctx, key)
	last := pipe.Get(ctx, lease.FenceKey(cfg.prefix, cfg.name))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading %s: %w", lease.Quote(key), err)
	}
	held, ttl := "yes", ""
	switch left := pttl.Val(); {
	case left == -2:
		held, ttl = "no", "-"
	case left < 0:
		ttl = "none (the key has no expiry)"
	default:
		ttl = left.Round(time.Millisecond).String()
	}
	token := last.Val()
	if token == "" {
		token = "none"
	}
	_, err := fmt.Fprintf(out, "lock: %s\nkey: %s\nheld: %s\nttl: %s\nlast token: %s\n", cfg.name, key, held, ttl, token)
	return err
}

package scripts

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acquire queues the efficiency acquire on c: SET key owner NX PX ttl GET.
//
// It is a plain command, not a script, because it is the hot path: a script
// costs Redis several microseconds more than SET, which on loopback is a tenth
// of a round trip. GET makes it safe to retry: a call resent after a lost reply
// finds the caller's own owner id and reports the grant again, never "not
// obtained". Read the reply with Granted.
func Acquire(ctx context.Context, c redis.Cmdable, key, owner string, ttl time.Duration) *redis.StatusCmd {
	return c.SetArgs(ctx, key, owner, redis.SetArgs{Mode: "NX", TTL: ttl, Get: true})
}

// Granted reads Acquire's reply: true when the key was free and is now the
// owner's, or already held the owner's id (a retried call); false when
// another owner holds it.
func Granted(cmd *redis.StatusCmd, owner string) (bool, error) {
	prev, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil
	case err != nil:
		return false, err
	}
	return prev == owner, nil
}

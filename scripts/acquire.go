package scripts

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acquire queues the efficiency acquire on c: SET key owner NX PX ttl, true
// when the key was free and is now the owner's.
//
// It is a plain command, not a script, because it is the hot path: a script
// costs Redis several microseconds more than SET, a tenth of a loopback round
// trip. A false reply is ambiguous only after a client retry (go-redis resends
// a command whose reply was lost, and the resent SET finds the first one's
// key): read the key with Holder to tell the caller's own grant from another
// owner's.
func Acquire(ctx context.Context, c redis.Cmdable, key, owner string, ttl time.Duration) *redis.BoolCmd {
	return c.SetNX(ctx, key, owner, ttl)
}

// Holder queues a read of the lock's current value: the holder's owner id, or
// redis.Nil when the lock is free.
func Holder(ctx context.Context, c redis.Cmdable, key string) *redis.StringCmd {
	return c.Get(ctx, key)
}

// Granted reads the replies of Acquire and, when it said false, Holder: true
// when the lock is the owner's.
func Granted(set *redis.BoolCmd, holder *redis.StringCmd, owner string) (bool, error) {
	if ok, err := set.Result(); err != nil || ok {
		return ok, err
	}
	if holder == nil {
		return false, nil
	}
	v, err := holder.Result()
	if err == redis.Nil {
		return false, nil // released in between: not ours, try again
	}
	return err == nil && v == owner, err
}

package efficiency

import (
	"context"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Locker grants efficiency locks. It is safe for concurrent use; create one per
// process and Close it when done.
type Locker struct {
	core *lease.Core
}

// New returns a Locker that runs its locks through client, which may be a
// *redis.Client, *redis.ClusterClient or any other UniversalClient.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	o := newOptions(opts)
	return &Locker{core: lease.New(lease.Config{
		Client:      client,
		Prefix:      o.prefix,
		DriftFactor: o.drift,
		Owners:      o.owners,
		Logger:      o.logger,
		Mine:        func(owner string) (string, bool) { return owner, false },
		Errors: lease.Errors{
			NotObtained: ErrNotObtained,
			NotHeld:     ErrNotHeld,
			LockLost:    ErrLockLost,
			InvalidKey:  ErrInvalidKey,
			InvalidTTL:  ErrInvalidTTL,
		},
		Acquire: acquire(client),
	})}
}

// acquire runs SET NX PX: one round trip when the lock is free. A waiter
// pipelines GET and PTTL with it, for the holder's ttl and to recognise its own
// grant after a client retry: still one round trip. A failed TryObtain reads
// the holder in a second round trip, for the same reason; a failed probe (the
// first attempt of Obtain) leaves that to the waiter's attempt that follows.
func acquire(client redis.UniversalClient) lease.AcquireFunc {
	return func(ctx context.Context, k *lease.Keys, owner string, ttl time.Duration, mode lease.Mode) (lease.Attempt, error) {
		key := k.Lock()
		var set *redis.BoolCmd
		var holder *redis.StringCmd
		var pttl *redis.DurationCmd
		if mode == lease.Wait {
			pipe := client.Pipeline()
			set = scripts.Acquire(ctx, pipe, key, owner, ttl)
			holder = scripts.Holder(ctx, pipe, key)
			pttl = pipe.PTTL(ctx, key)
			_, _ = pipe.Exec(ctx) // each command's error is read below
		} else {
			set = scripts.Acquire(ctx, client, key, owner, ttl)
			if ok, err := set.Result(); err == nil && !ok && mode == lease.Try {
				holder = scripts.Holder(ctx, client, key)
			}
		}
		granted, err := scripts.Granted(set, holder, owner)
		switch {
		case err != nil:
			return lease.Attempt{}, lease.WrapRedis("acquire", key, err)
		case granted:
			return lease.Attempt{Granted: true, Value: owner}, nil
		case pttl == nil:
			return lease.Attempt{HolderTTL: -1}, nil
		}
		left, err := pttl.Result()
		switch {
		case err != nil:
			return lease.Attempt{}, lease.WrapRedis("acquire", key, err)
		case left == -2:
			// Released or expired within the pipeline: try again now.
			return lease.Attempt{HolderTTL: 0}, nil
		case left < 0:
			return lease.Attempt{HolderTTL: -1}, nil
		}
		return lease.Attempt{HolderTTL: left}, nil
	}
}

// Close ends the Locker's wake-up subscription. Obtain calls still waiting
// return ErrNotObtained. Held locks are not released. Close does not close
// the client.
func (l *Locker) Close() error { return l.core.Close() }

// TryObtain makes one attempt to take the lock called key for ttl. It returns
// ErrNotObtained when another owner holds it, ErrInvalidKey or ErrInvalidTTL
// for bad input, and a Redis failure wrapped with the key's name.
func (l *Locker) TryObtain(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	h, err := l.core.Try(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &Lock{h: h}, nil
}

// Obtain takes the lock called key for ttl, waiting while another owner holds
// it. On a *redis.Client waiters queue, and the holder's release hands the lock
// to the first in arrival order; on other clients the release wakes one waiter
// per Locker, which tries again. If the holder never releases, waiters try
// again when its ttl runs out. When ctx ends first, the error matches both
// ErrNotObtained and ctx.Err(). When three grants in a row come back after
// their lease deadline (a ttl shorter than the round trip), Obtain releases
// them and returns ErrNotObtained rather than try forever.
func (l *Locker) Obtain(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	h, err := l.core.Obtain(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &Lock{h: h}, nil
}

// Do obtains the lock called key (waiting like Obtain), runs fn while
// refreshing the lease every ttl/3, and releases the lock when fn returns.
//
// fn's context is cancelled, with a cause matching ErrLockLost, as soon as the
// lease can no longer be confirmed before its Deadline: a refresh found the key
// deleted or taken, or Redis could not be reached in time. fn should stop its
// work then; Do's error matches ErrLockLost. Cancellation only narrows the
// window: a holder can still pause right after its last check.
func (l *Locker) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context) error) error {
	return l.core.Do(ctx, key, ttl, func(ctx context.Context, _ *lease.Held) error { return fn(ctx) })
}

// Once runs fn at most once per period for key across every process sharing
// the Redis: cron-style deduplication. The first caller takes the lock for
// period and runs fn, and Once returns true with fn's error. A caller that
// finds the lock taken returns false, nil. One whose grant came back after its
// lease deadline (a ttl too short for the link) releases it and returns false
// with an error matching ErrNotObtained, since nobody runs fn for that grant.
//
// The lock is not released when fn returns, so a replica whose timer fires late
// for the same tick still skips. While fn runs past the period the lock is kept
// alive (and released as soon as that long run ends); losing it cancels fn's
// context with cause ErrLockLost, as in Do.
func (l *Locker) Once(ctx context.Context, key string, period time.Duration, fn func(ctx context.Context) error) (ran bool, err error) {
	return l.core.Once(ctx, key, period, func(ctx context.Context, _ *lease.Held) error { return fn(ctx) })
}

package efficiency

import (
	"context"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
)

// Semaphore is a fair counting semaphore: at most its limit of permits are
// held at once, across every Locker sharing the Redis. A permit is a *Lock:
// Refresh, Release, TTL and Hold work on it as on a lock, and its lease ends
// at its ttl if its holder dies. It is safe for concurrent use.
//
// While any permit of a semaphore is live, every acquire must use the limit
// those permits were granted under: one with another limit fails with
// ErrLimitMismatch, which names both. Once no permit is live, the next
// acquire sets the limit anew.
type Semaphore struct {
	s *lease.Semaphore
}

// Semaphore returns the semaphore called name with limit permits. It touches
// no key: an empty name, one starting with '}', or a limit below 1 fails
// every acquire of the semaphore with ErrInvalidKey or ErrInvalidLimit.
//
// Its keys are <prefix>{name}:permits and two beside it (its queue and its
// limit), in the Redis Cluster slot of the lock called name, which is
// another thing: a lock and a semaphore of one name do not exclude each
// other.
func (l *Locker) Semaphore(name string, limit int) *Semaphore {
	l.mustExist("Semaphore")
	return &Semaphore{s: l.core.Semaphore(name, limit)}
}

// TryAcquire makes one attempt to take a permit for ttl. It returns
// ErrTaken (which matches ErrNotObtained too) when every permit is held (the
// waiters queued for one are served first), an error matching
// ErrNotObtained and ctx.Err() (not ErrTaken) when ctx has ended;
// ErrLimitMismatch when the semaphore's live permits were granted under another
// limit; ErrLateGrant when the grant's reply came after its lease deadline;
// ErrInvalidKey, ErrInvalidLimit or ErrInvalidTTL for bad input; ErrClosed
// after Close; and a Redis failure wrapped with the semaphore's name.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	h, err := s.s.Try(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return &Lock{h: h}, nil
}

// Acquire takes a permit for ttl, waiting while every permit is held: the
// waiters queue, and a released permit is handed to the first in line, as
// Obtain's lock is. A permit whose holder died frees itself at its ttl, and
// the waiters learn of it then, by a timer set to the first permit's
// expiry. Whatever was lost meanwhile, a waiter finds a free permit within
// about a second, and it rides out Redis failures while it waits.
//
// A Redis failure on the first attempt is returned at once. When ctx ends
// first, the error matches both ErrNotObtained and ctx.Err(); when the
// Locker is closed, ErrClosed; when the semaphore's live permits were
// granted under another limit, ErrLimitMismatch. When three grants in a row
// come back after their lease deadline (a ttl shorter than the round
// trip), Acquire releases them and returns ErrLateGrant.
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	h, err := s.s.Obtain(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return &Lock{h: h}, nil
}

// Do takes a permit (waiting like Acquire), runs fn while refreshing it
// every ttl/3, and releases it when fn returns, as Locker.Do does with a
// lock: fn's context is cancelled with a cause matching ErrLockLost as soon
// as the permit can no longer be confirmed before its Deadline, and Do's
// error then matches ErrLockLost; the release runs on a context of its own;
// a panic in fn releases the permit and goes on up the stack. A nil fn is an
// error, before anything is acquired.
func (s *Semaphore) Do(ctx context.Context, ttl time.Duration, fn func(ctx context.Context) error) error {
	if fn == nil {
		return nilFunc("Semaphore.Do")
	}
	return s.s.Do(ctx, ttl, func(ctx context.Context, _ *lease.Held) error { return fn(ctx) })
}

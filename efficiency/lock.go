package efficiency

import (
	"context"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
)

// Lock is a granted efficiency lock, or a permit of a Semaphore. Its methods
// are safe on a nil *Lock, which holds nothing.
type Lock struct {
	h *lease.Held
}

// Key returns the lock's Redis key, <prefix>{name}; a permit's is its
// semaphore's, <prefix>{name}:permits.
func (l *Lock) Key() string {
	if l == nil || l.h == nil {
		return ""
	}
	return l.h.Key()
}

// Deadline returns the conservative local expiry of the lease: when the last
// acquire or refresh was sent, plus its ttl, minus the drift margin, on the
// monotonic clock. Past it, Redis may already have handed the lock to another
// owner. The zero time after Release, or on a nil *Lock.
func (l *Lock) Deadline() time.Time {
	if l == nil || l.h == nil {
		return time.Time{}
	}
	return l.h.Deadline()
}

// TTL asks Redis how long the lease has left. It returns ErrNotHeld when the
// key is gone or another owner holds the lock (the error says which), and -1
// when the key has no expiry (someone removed it with PERSIST).
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil || l.h == nil {
		return 0, ErrNotHeld
	}
	return l.h.TTL(ctx)
}

// Refresh restarts the lease at ttl if the caller still holds it, and moves
// Deadline. It returns ErrNotHeld when the lease expired or another owner holds
// the lock (nothing is changed then), and ErrInvalidTTL for a ttl under 1 ms.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	return l.h.Refresh(ctx, ttl)
}

// Hold runs fn while keeping the lease alive, refreshing it every third of its
// ttl (that of the grant, or of the last Refresh), and releases the lock when
// fn returns: Do without the acquire, for a lock taken with TryObtain or with
// an Obtain whose wait had its own deadline.
//
// fn's context is cancelled, with a cause matching ErrLockLost, as soon as the
// lease can no longer be confirmed before its Deadline; Hold's error then
// matches ErrLockLost. The release runs on a context of its own, so it happens
// even when ctx has ended; if fn panics, the lock is released and the panic
// goes on. If fn releases the lock itself, Hold stops refreshing it.
func (l *Lock) Hold(ctx context.Context, fn func(ctx context.Context) error) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	if fn == nil {
		return nilFunc("Hold")
	}
	return l.h.Hold(ctx, func(ctx context.Context, _ *lease.Held) error { return fn(ctx) })
}

// Release ends the lock if the caller still holds it, handing it to the next
// waiter or deleting it (see Obtain). It returns ErrNotHeld when the key is
// gone or another owner holds the lock (which is then left untouched; the error
// says which, or that an operator broke it), when l is nil, and when a
// Release of l returned already. After a lost reply go-redis sends the
// release again; the second send finds the mark the first left in Redis
// (docs/reliability.md, "Commands sent again") and reports the release, as
// does a Release the caller calls again after an error.
//
// Release needs a context that has not ended: with an ended one it cannot
// reach Redis, and the lock stays held until its ttl runs out. So a deferred
// Release gets a short context of its own rather than the work's:
//
//	defer func() {
//		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
//		defer cancel()
//		_ = lock.Release(ctx)
//	}()
//
// Do and Hold do this for you.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	return l.h.Release(ctx)
}

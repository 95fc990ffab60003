package correctness

import (
	"context"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
)

// Lease is a granted correctness lock with its fencing token. Its methods are
// safe on a nil *Lease, which holds nothing.
type Lease struct {
	h *lease.Held
}

// Key returns the lock's Redis key, <prefix>{name}.
func (l *Lease) Key() string {
	if l == nil || l.h == nil {
		return ""
	}
	return l.h.Key()
}

// Token returns the grant's fencing token: strictly greater than every token
// granted before for this lock, as long as Redis kept its counter (see the
// package doc for what can lose it, and the clock floor that guards against
// that).
//
// The token protects nothing by itself. This lock is only as safe as the
// checks at the resource: every write the holder makes must carry the token,
// and the resource must reject a token older than the newest it has accepted,
// in the same atomic step as the write (Register, ExecFenced, FencingProxy).
func (l *Lease) Token() uint64 {
	if l == nil || l.h == nil {
		return 0
	}
	return l.h.Token()
}

// Deadline returns the conservative local expiry of the lease: when the last
// acquire or refresh was sent, plus its ttl, minus the drift margin, on the
// monotonic clock. Past it, Redis may already have handed the lock to another
// owner. The zero time after Release, or on a nil *Lease.
func (l *Lease) Deadline() time.Time {
	if l == nil || l.h == nil {
		return time.Time{}
	}
	return l.h.Deadline()
}

// TTL asks Redis how long the lease has left. It returns ErrNotHeld when the
// key is gone or another owner holds the lock (the error says which), and -1
// when the key has no expiry (someone removed it with PERSIST).
func (l *Lease) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil || l.h == nil {
		return 0, ErrNotHeld
	}
	return l.h.TTL(ctx)
}

// Refresh restarts the lease at ttl if the caller still holds it, and moves
// Deadline; the token does not change. It returns ErrNotHeld when the lease
// expired or another owner holds the lock (nothing is changed then), and
// ErrInvalidTTL for a ttl under 1 ms.
func (l *Lease) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	return l.h.Refresh(ctx, ttl)
}

// Hold runs fn with the lease's token while keeping the lease alive, and
// releases the lock when fn returns, as
// [github.com/leasekit/leasekit/efficiency.Lock.Hold] does: Do without the
// acquire. When the lease is lost, fn's context is cancelled with a cause
// matching ErrLockLost; only the fence makes a write after that harmless.
func (l *Lease) Hold(ctx context.Context, fn func(ctx context.Context, token uint64) error) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	if fn == nil {
		return nilFunc("Hold")
	}
	return l.h.Hold(ctx, func(ctx context.Context, h *lease.Held) error { return fn(ctx, h.Token()) })
}

// Release ends the lock if the caller still holds it, handing it, with a new
// token, to the next waiter or deleting it. It returns ErrNotHeld as
// [github.com/leasekit/leasekit/efficiency.Lock.Release] does, and like it
// needs a context that has not ended, or the lock stays held until its ttl
// runs out: that doc shows a deferred Release. Do and Hold release on a
// context of their own.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil || l.h == nil {
		return ErrNotHeld
	}
	return l.h.Release(ctx)
}

package efficiency

import (
	"context"
	"time"
)

// Info is what Inspect reads of a lock. Nothing in it lets anyone release
// the lock.
type Info struct {
	Held    bool          // a live lease holds the lock
	TTL     time.Duration // left on that lease; 0 when not held (negative: a key set by hand without expiry)
	Waiters int           // live waiters queued for it
}

// Inspect reads the lock called name in one round trip, without changing
// anything, and never returns or logs the holder's owner id. A lease that
// lapsed (its holder died) with waiters queued is not held: the first live
// waiter takes it at its next attempt. Waiters counts the live entries
// among the first 300 of the lock's queue, and every entry past those
// unchecked, so that the read stays short however many a killed process
// left; waiters on a Ring or a Redis 6 cluster do not queue and are not
// counted. It returns ErrInvalidKey for a bad name, ErrClosed after Close,
// and a Redis failure naming the lock and its key (a key that holds what
// leasekit never writes: WRONGTYPE).
func (l *Locker) Inspect(ctx context.Context, name string) (Info, error) {
	l.mustExist("Inspect")
	i, err := l.core.Inspect(ctx, name)
	return Info{Held: i.Held, TTL: i.TTL, Waiters: i.Waiters}, err
}

// Break ends the lease on the lock called name at once, whoever holds it,
// and hands the lock to the first live waiter, exactly as the holder's
// release would. It reports whether a live lease was broken (false when
// nobody held the lock). The broken holder is not asked, and may still be
// running until it learns of the break: two holders may then overlap, as
// after a pause past the ttl, so break only a holder known to be dead (its
// host gone, its process killed) or one whose overlap costs little. Its Do
// or Hold learns of it at its next refresh (its ctx ends with ErrLockLost),
// and its Release returns ErrNotHeld. Every break is logged at WARN with
// the lock's name and counted (leasekit.lock.breaks, and a span). Errors as
// Inspect's.
func (l *Locker) Break(ctx context.Context, name string) (broken bool, err error) {
	l.mustExist("Break")
	return l.core.Break(ctx, name, "")
}

// SemaphoreInfo is what Semaphore.Inspect reads. Nothing in it lets anyone
// release a permit.
type SemaphoreInfo struct {
	Limit   int // the limit of the live permits; 0 when none is live
	Held    int // live permits
	Waiters int // live waiters queued
}

// Inspect reads the semaphore in one round trip, without changing
// anything, and counts its waiters as Locker.Inspect counts a lock's. A
// semaphore has no single holder to break: a permit whose holder died
// returns at its ttl. Errors as Locker.Inspect's.
func (s *Semaphore) Inspect(ctx context.Context) (SemaphoreInfo, error) {
	i, err := s.s.Inspect(ctx)
	return SemaphoreInfo{Limit: max(i.Limit, 0), Held: i.Held, Waiters: i.Waiters}, err
}

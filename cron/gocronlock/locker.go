package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-co-op/gocron/v2"
	"github.com/leasekit/leasekit/efficiency"
)

// Locker is a gocron.Locker on leasekit efficiency locks, with a minimum
// hold. Pass it to gocron.WithDistributedLocker (or, per job,
// gocron.WithDistributedJobLocker). It is safe for concurrent use.
type Locker struct {
	locker *efficiency.Locker
	opts   options
}

var _ gocron.Locker = (*Locker)(nil)

// errNoLocker is Lock's error on a zero Locker, built without New.
var errNoLocker = errors.New("gocronlock: no efficiency.Locker: use gocronlock.New(efficiency.New(client))")

// New returns a Locker that takes its locks from locker, which may serve other
// locks too. It panics if locker is nil, as net/http does for a nil handler:
// that is a bug in the caller, found at once rather than at the first tick.
func New(locker *efficiency.Locker, opts ...Option) *Locker {
	if locker == nil {
		panic("gocronlock: New: nil efficiency.Locker")
	}
	return &Locker{locker: locker, opts: newOptions(opts)}
}

// Lock takes the lock called name (gocron passes the job's name) for one
// run, if no other scheduler holds it. It returns an error matching
// efficiency.ErrTaken (and ErrNotObtained) when another scheduler holds it
// (gocron then skips the run on this one), efficiency.ErrInvalidKey for an
// empty name, efficiency.ErrInvalidTTL for a minimum hold under 1 ms, and a
// Redis failure that names the lock.
//
// The lock is kept alive until Unlock, or until ctx ends (gocron passes the
// job's context, which ends when the job is removed or the scheduler shuts
// down): the hold then ends as at Unlock, even if the job is still running.
func (l *Locker) Lock(ctx context.Context, name string) (gocron.Lock, error) {
	if l == nil || l.locker == nil {
		return nil, errNoLocker
	}
	k := &lock{name: name, unlock: make(chan struct{}), released: make(chan struct{})}
	taken := make(chan struct{})
	go func() {
		defer close(k.released)
		ran, err := l.locker.Once(ctx, name, l.opts.minHold, func(ctx context.Context) error {
			close(taken)
			select {
			case <-k.unlock:
			case <-ctx.Done():
				// The lease was lost, or Lock's ctx ended: either way nothing
				// refreshes the lease any more, so end the hold now rather
				// than wait for an Unlock that may never come.
			}
			return nil
		})
		switch {
		case !ran && err == nil:
			err = fmt.Errorf("gocronlock: lock %q is held by another scheduler: %w", name, efficiency.ErrTaken)
		case !ran:
			err = fmt.Errorf("gocronlock: lock %q: %w", name, err)
		case err != nil:
			err = fmt.Errorf("gocronlock: unlock %q: %w", name, err)
			l.opts.logger.Warn("gocronlock: the job's lock was lost or not released cleanly", "job", name, "err", err)
		}
		k.err = err
	}()
	select {
	case <-taken:
		return k, nil
	case <-k.released:
		return nil, k.err
	}
}

// lock is one run's hold on a job's lock.
type lock struct {
	name     string
	unlock   chan struct{} // closed by Unlock: the run has ended
	once     sync.Once
	released chan struct{} // closed when the lock is shortened or released
	err      error         // set before released closes
}

// Unlock ends the run's hold: the lock is kept until the minimum hold has
// passed since it was taken, then expires; past that it is released now. It
// returns an error matching efficiency.ErrLockLost if the lease was lost while
// the job ran, a Redis failure, or ctx's error if ctx ends first (the lock is
// then still shortened or released, in the background). Calling it again is
// safe.
func (k *lock) Unlock(ctx context.Context) error {
	k.once.Do(func() { close(k.unlock) })
	select {
	case <-k.released:
		return k.err
	default:
	}
	select {
	case <-k.released:
		return k.err
	case <-ctx.Done():
		return fmt.Errorf("gocronlock: unlock %q: %w", k.name, ctx.Err())
	}
}

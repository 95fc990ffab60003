package lease

import (
	"context"
	"time"

	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
)

// kind is how the engine runs one kind of resource: a lock of a Core (lock,
// below), or the permits of a semaphore (permits, semaphore.go). Acquiring,
// waiting, the handoff and a Held are the same for both; every difference
// is a method here, and no other code asks which kind it runs.
//
// The methods take an acquire by value: one called through an interface
// cannot be seen into, so a pointer would move the caller's acquire to the
// heap.
type kind interface {
	// what names the kind in messages: "lock" or "semaphore".
	what() string
	// telemetry records the resource's acquires and holds; spans name its
	// acquires (TryObtain and Obtain, or TryAcquire and Acquire).
	telemetry() *telemetry.Telemetry
	spans() (try, wait string)
	// invalid, when not nil, is the error of every acquire: a semaphore
	// whose limit is below 1.
	invalid() error
	// attempt makes a lone attempt (probe: the first attempt of a wait, see
	// acquire.once); settle goes on serving the queue after an attempt
	// that found it must be served first (found.settle).
	attempt(a acquire, probe bool) (found, error)
	settle(a acquire) (found, error)
	// waitScript is the script of a waiter's attempt and its ARGV[3],
	// boxed once: the lock's kind, or the semaphore's limit.
	waitScript() (Script, any)
	// releaseScript is the script of a release of a grant.
	releaseScript() Script
	// refresh restarts the ttl of the Held h, and with leader, an
	// election's leader key (a lock's alone), keeps that alive too; pttl
	// asks how long h has left.
	refresh(ctx context.Context, h *Held, ttl time.Duration, leader string) (any, error)
	pttl(ctx context.Context, h *Held) (any, error)
	// busy says why a lone attempt on lk found no room.
	busy(lk *keySet) string
	// refused is the error of an error reply of the resource's scripts
	// that the caller can act on (a corrupt fence counter, another limit);
	// nil for any other.
	refused(lk *keySet, err error) error
	// keyOf is the key that err, a failure of a script on lk, is about.
	keyOf(ctx context.Context, lk *keySet, err error) string
	// checkGrant is the error of the grant message m that the waiter w
	// must not take (and releases); nil for one it may.
	checkGrant(w *waiter, m scripts.Message) error
}

// lock is the kind of one lock of a Core. Its keys are the lock's key, its
// wait queue and its fence counter, the KEYS of every script that may grant
// it (a release may hand an efficiency lock to a waiter that runs it as a
// correctness lock); the scripts of a Held take the lock's key, and its
// counter where that expires with the lease.
type lock struct {
	c       *Core
	counter any // the fence counter's key, boxed once
}

var _ kind = (*lock)(nil)

// newLock returns the keys of the lock called name.
func (c *Core) newLock(name string) *keySet {
	key := scripts.LockKey(c.cfg.Prefix, name)
	var keyArg, queue, counter any = key, scripts.QueueKey(key), scripts.CounterKey(key)
	return &keySet{name: name, key: key, keyArg: keyArg, keys: []any{keyArg, queue, counter}, kind: &lock{c: c, counter: counter}}
}

// what is "lock".
func (*lock) what() string { return "lock" }

// telemetry is the Core's.
func (l *lock) telemetry() *telemetry.Telemetry { return l.c.cfg.Telemetry }

// spans are the Core's names for its acquires.
func (l *lock) spans() (try, wait string) { return l.c.cfg.TryOp, l.c.cfg.WaitOp }

// invalid is nil: a lock's name is checked by every acquire.
func (*lock) invalid() error { return nil }

// waitScript is wait.lua, with the lock's kind.
func (l *lock) waitScript() (Script, any) { return waitScript, l.c.kindArg }

// releaseScript is release.lua.
func (*lock) releaseScript() Script { return releaseScript }

// attempt is SET NX for an efficiency lock (setNX), the fenced acquire
// script for a fenced one (acquireFenced).
func (l *lock) attempt(a acquire, probe bool) (found, error) {
	if l.c.cfg.Fenced {
		return acquireFenced(a, l.c.kindArg)
	}
	return setNX(a, probe)
}

// settle makes a lone attempt through the wait script, which serves the
// queue first.
func (l *lock) settle(a acquire) (found, error) {
	return a.runGrant(waitScript, a.readWait, a.owner, Millis(a.ttl), l.c.kindArg, notQueued, notQueued, notQueued, a.c.listen.channels)
}

// refresh restarts the lock's ttl. Where the fence counter expires with
// the lease (ARGV[3] "t"), it lives as long as the lease that drew from it.
func (l *lock) refresh(ctx context.Context, h *Held, ttl time.Duration, leader string) (any, error) {
	var counter any = ""
	if l.c.cfg.ExpiringCounter {
		counter = "t"
	}
	switch {
	case leader != "":
		return l.c.run(ctx, refreshScript, []any{h.keys.keyArg, l.counter, leader}, h.value, Millis(ttl), counter)
	case l.c.cfg.ExpiringCounter:
		return l.c.run(ctx, refreshScript, []any{h.keys.keyArg, l.counter}, h.value, Millis(ttl), counter)
	case h.plainLock():
		// SET IFEQ PX where the server has it (plain.go); the script
		// where it does not, or the value is not the bare grant.
		done, err := l.c.plainRefresh(ctx, h.keys, h.value, ttl)
		if done || err != nil {
			return int64(1), err
		}
	}
	return l.c.run(ctx, refreshScript, []any{h.keys.keyArg}, h.value, Millis(ttl))
}

// pttl runs pttl.lua on the lock's key.
func (l *lock) pttl(ctx context.Context, h *Held) (any, error) {
	return l.c.run(ctx, pttlScript, []any{h.keys.keyArg}, h.value)
}

// busy says the lock is another owner's.
func (*lock) busy(lk *keySet) string {
	return "lock " + Quote(lk.name) + " is held by another owner"
}

// refused is fenceErr: a corrupt fence counter.
func (l *lock) refused(lk *keySet, err error) error { return l.c.fenceErr(lk, err) }

// keyOf is the lock's key, whatever the failure.
func (*lock) keyOf(_ context.Context, lk *keySet, _ error) string { return lk.key }

// checkGrant takes every grant message for the waiter's entry.
func (*lock) checkGrant(*waiter, scripts.Message) error { return nil }

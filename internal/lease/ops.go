package lease

import (
	"context"
	"time"

	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// ops is how the engine runs one kind of resource: the locks of a Core, or
// the permits of one semaphore (semaphore.go). Acquiring, waiting, the
// handoff and a Held are the same for both; every difference is a field
// here, and no other code asks which kind it runs.
//
// The functions take an acquire by value: one called through a field
// cannot be seen into, so a pointer would move the caller's acquire to
// the heap.
type ops struct {
	what   string // "lock" or "semaphore", in messages
	limit  int    // a semaphore's
	tel    *telemetry.Telemetry
	tryOp  string // the acquires, as spans name them
	waitOp string
	// invalid, when not nil, is the error of every acquire: a semaphore
	// whose limit is below 1.
	invalid error
	// keys are the KEYS of the scripts of the resource whose first key is
	// first (see keySet), built once per name; the scripts of a Held take
	// the first held of them.
	keys func(first string) []any
	held int
	// attempt makes a lone attempt (probe: the first attempt of a wait, see
	// acquire.once); settle goes on serving the queue after an attempt that
	// found it must be served first (found.settle).
	attempt func(a acquire, probe bool) (found, error)
	settle  func(a acquire) (found, error)
	// The scripts of a waiter's attempt and of a Held's release and ttl;
	// refresh runs the Held's refresh.
	wait, release, pttl Script
	refresh             func(h *Held, ctx context.Context, ttl time.Duration) *redis.Cmd
	// arg is the wait script's ARGV[3], boxed once: the lock's kind, or the
	// semaphore's limit.
	arg any
	// busy says why a lone attempt found no room.
	busy func(k *keySet) string
	// refused is the error of an error reply of the resource's scripts that
	// the caller can act on (a corrupt fence counter, another limit); nil
	// for any other.
	refused func(c *Core, lk *keySet, err error) error
	// keyOf is the key that err, a failure of a script on lk, is about.
	keyOf func(c *Core, ctx context.Context, lk *keySet, err error) string
	// checkGrant is the error of the grant message m that the waiter w must
	// not take (and releases); nil for one it may.
	checkGrant func(w *waiter, m scripts.Message) error
}

// lockOps are the ops of a Core's locks.
func lockOps(c *Core) *ops {
	o := &ops{what: "lock", tel: c.cfg.Telemetry, tryOp: c.cfg.TryOp, waitOp: c.cfg.WaitOp,
		keys: lockScriptKeys, held: 1, attempt: setNX, settle: settleLock,
		wait: waitScript, release: releaseScript, pttl: pttlScript, refresh: (*Held).refreshLock,
		arg: c.kind, busy: (*keySet).lockBusy, refused: (*Core).fenceErr, keyOf: lockKeyOf, checkGrant: takeAnyGrant}
	if c.cfg.Fenced {
		o.attempt = acquireFenced
	}
	return o
}

// lockScriptKeys are the keys of the lock whose key is key: the lock, its
// wait queue and its fence counter, the KEYS of every script that may grant
// it (a release may hand an efficiency lock to a waiter that runs it as a
// correctness lock); scripts that touch only the lock take the first.
func lockScriptKeys(key string) []any {
	return []any{key, scripts.QueueKey(key), scripts.CounterKey(key)}
}

// lockBusy says why a lone attempt found the lock taken.
func (k *keySet) lockBusy() string { return "lock " + Quote(k.name) + " is held by another owner" }

// lockKeyOf is the key a failure of a lock's script is about: the lock's.
func lockKeyOf(_ *Core, _ context.Context, lk *keySet, _ error) string { return lk.lock }

// takeAnyGrant says a lock's waiter takes every grant message for its
// entry.
func takeAnyGrant(*waiter, scripts.Message) error { return nil }

package lease

import (
	"sync/atomic"

	"github.com/leasekit/leasekit/scripts"
)

// DefaultPrefix is the key prefix of both kinds of lock unless an option sets
// another (the key layout is package scripts').
const DefaultPrefix = scripts.DefaultPrefix

// keySet is one lock or semaphore as the engine runs it: its name, its
// Redis keys, boxed once as script arguments, and its kind. Built once per
// name and kept (see Core.lockKeys, Core.Semaphore), it spares every
// acquire and release the allocations of building and boxing its keys.
type keySet struct {
	name string // the name, as the caller passed it
	// key is the lock's key, or the semaphore's permits' (PermitsKey):
	// its channels and the marks of its releases derive from it; keyArg
	// is key, boxed.
	key    string
	keyArg any
	// keys are the KEYS of every script that may grant or release it,
	// boxed once: key, its wait queue, and a lock's fence counter (see
	// Core.newLock, Core.Semaphore).
	keys []any
	kind kind
	// busy is when, in Unix ns, the lock was last seen contended by this
	// Core: a waiter of its waited, or a plain command found waiters'
	// mark (plain.go). For a while after, its leases skip the plain path,
	// whose miss would cost a round trip more.
	busy atomic.Int64
}

// label names the lock or semaphore in messages.
func (k *keySet) label() string { return k.kind.what() + " " + Quote(k.name) }

// keyCacheSize bounds the lock names a Core keeps keys for. Locks are usually a
// few names used again and again; a caller that locks ever new names builds
// their keys afresh past this many, and memory stays bounded.
const keyCacheSize = 4096

// keyCacheNameLen is the longest name whose keys are kept, so that the cache
// stays small in bytes too: a caller locking ever new megabyte names does
// not pin gigabytes.
const keyCacheNameLen = 256

// lockKeys returns the keys of the lock called name.
func (c *Core) lockKeys(name string) *keySet {
	if lk, ok := c.names.Load(name); ok {
		return lk.(*keySet)
	}
	lk := c.newLock(name)
	if len(name) <= keyCacheNameLen && c.cached.Load() < keyCacheSize {
		if _, loaded := c.names.LoadOrStore(name, lk); !loaded {
			c.cached.Add(1)
		}
	}
	return lk
}

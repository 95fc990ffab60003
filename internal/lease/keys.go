package lease

import "github.com/leasekit/leasekit/scripts"

// DefaultPrefix is the key prefix of both kinds of lock unless an option sets
// another (the key layout is package scripts').
const DefaultPrefix = scripts.DefaultPrefix

// keySet is the Redis keys of one lock or semaphore, boxed once as script
// arguments (ops.keys says which), and the ops that run it. Built once per
// name and kept (see Core.lockKeys, Core.Semaphore), they spare every
// acquire and release the allocations of building and boxing its keys.
type keySet struct {
	name string // the name, as the caller passed it
	lock string // the first key
	keys []any
	ops  *ops
}

// newKeys returns the keys of the lock or semaphore called name whose first
// key is key, run by o.
func newKeys(name, key string, o *ops) *keySet {
	return &keySet{name: name, lock: key, keys: o.keys(key), ops: o}
}

// held are the KEYS of the scripts of a Held.
func (k *keySet) held() []any { return k.keys[:k.ops.held] }

// label names the lock or semaphore in messages.
func (k *keySet) label() string { return k.ops.what + " " + Quote(k.name) }

// refreshKeys are the refresh script's keys where the counter expires with
// the lease: the lock and its counter.
func (k *keySet) refreshKeys() []any { return []any{k.keys[0], k.keys[2]} }

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
	lk := newKeys(name, scripts.LockKey(c.cfg.Prefix, name), c.lock)
	if len(name) <= keyCacheNameLen && c.cached.Load() < keyCacheSize {
		if _, loaded := c.names.LoadOrStore(name, lk); !loaded {
			c.cached.Add(1)
		}
	}
	return lk
}

package lease

import (
	"crypto/sha256"
	"encoding/hex"
)

// DefaultPrefix is the key prefix of both kinds of lock unless an option sets
// another.
const DefaultPrefix = "leasekit:"

// LockKey is the Redis key of the lock called name. The hash tag keeps the lock
// and every key derived from it in one Redis Cluster slot.
func LockKey(prefix, name string) string { return prefix + "{" + name + "}" }

// CounterKey is the key of the fencing-token counter of the lock called name.
func CounterKey(prefix, name string) string { return counterKey(LockKey(prefix, name)) }

func counterKey(lockKey string) string { return lockKey + ":fence" }

// QueueKey is the key of the lock's wait queue (see handoff.go).
func QueueKey(lockKey string) string { return lockKey + ":queue" }

// wakeChannel is the pub/sub channel on which releases of the lock are
// announced to waiters that do not queue. release.lua builds the same name.
func wakeChannel(lockKey string) string { return lockKey + ":wake" }

// grantChannel is the pub/sub channel on which the Locker whose id is id
// hears the grants handed to its waiters.
func grantChannel(prefix, id string) string { return prefix + "grants:" + id }

// shardedGrantChannel is the sharded pub/sub channel on which the Locker
// whose id is id hears the grants of the lock at lockKey handed to its
// waiters, in Redis Cluster: it hashes to the lock's slot.
func shardedGrantChannel(lockKey, id string) string { return lockKey + ":grants:" + id }

// EndedKey is the key of the mark that the release or break of the grant
// stored as value, on the lock or semaphore whose first key is key, leaves
// for a resend of the same call (release.lua): in the same slot, named by a
// digest of the value, which must not show an owner id.
func EndedKey(key, value string) string {
	sum := sha256.Sum256([]byte(value))
	var digest [20]byte
	hex.Encode(digest[:], sum[:10])
	return key + ":ended:" + string(digest[:])
}

// RegisterKey is the key of the fenced register of a resource.
func RegisterKey(prefix, resource string) string { return LockKey(prefix, resource) + ":register" }

// PermitsKey is the key of the permits of the semaphore called name, with
// its header (handoff.go). Its queue (QueueKey) derives from it, in the slot
// of the lock of the same name, which is another resource.
func PermitsKey(prefix, name string) string { return LockKey(prefix, name) + ":permits" }

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

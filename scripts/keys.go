package scripts

import (
	"crypto/sha256"
	"encoding/hex"
)

// The key layout. Every key of a lock, semaphore, election or register
// carries its name in a hash tag, so that all of one resource's keys share
// a Redis Cluster slot and one script can touch them together. An operator's
// repair script finds a resource's keys with these functions; they are part
// of leasekit's public API (CONTRIBUTING, "Public API").
//
//	<prefix>{name}                 the lock: its value (wire.go)
//	<prefix>{name}:queue           its wait queue, a sorted set
//	<prefix>{name}:fence           its fence counter (fenced kinds)
//	<prefix>{name}:wake            channel: a release with waiters that
//	                               do not queue
//	<prefix>{name}:ended:<digest>  the mark a release or break leaves for
//	                               a resend of the same call
//	<prefix>{name}:leader          an election's leader, a hash; and the
//	                               channel of its notices
//	<prefix>{name}:permits         a semaphore's permits and header
//	<prefix>{name}:permits:queue   the semaphore's wait queue
//	<prefix>{name}:register        a fenced register, a hash
//	<prefix>grants:<id>            channel: grants to one Locker's waiters
//	<prefix>{name}:grants:<id>     the same, sharded (Redis Cluster)
//
// An election called name is the correctness lock called name, with its
// leader key beside it: a hash whose field grant is the lock's value when
// its holder took office ("owner:token", without the mark of waiters) and
// value the value it proclaims. It expires with the lease (refresh.lua keeps
// it alive); a leader key left by an earlier grant names nobody. Its channel
// carries notices:
//
//	notice   = "elected" SP term SP ttl SP value | "vacant" SP term
//
// elected: the holder of the grant whose token is term took office (or
// wrote its leader key back) with ttl ms left on its lease (-1: no expiry);
// value is the rest of the message, any bytes. vacant: the leader of term
// left office, and nobody holds the lock. Anyone who may PUBLISH can send
// these, so leasekit takes a notice as a hint to read the keys, never as
// the news itself; other readers should do the same.

// DefaultPrefix is the key prefix of both kinds of lock unless an option sets
// another.
const DefaultPrefix = "leasekit:"

// LockKey is the Redis key of the lock called name.
func LockKey(prefix, name string) string { return prefix + "{" + name + "}" }

// CounterKey is the key of the fence counter of the lock at lockKey.
func CounterKey(lockKey string) string { return lockKey + ":fence" }

// QueueKey is the key of the wait queue of the lock or semaphore whose first
// key is key.
func QueueKey(key string) string { return key + ":queue" }

// WakeChannel is the pub/sub channel on which releases of the lock at
// lockKey are announced to waiters that do not queue.
func WakeChannel(lockKey string) string { return lockKey + ":wake" }

// GrantChannel is the pub/sub channel on which the Locker whose id is id
// hears the grants handed to its waiters.
func GrantChannel(prefix, id string) string { return prefix + "grants:" + id }

// ShardedGrantChannel is the sharded pub/sub channel on which the Locker
// whose id is id hears the grants of the lock at lockKey handed to its
// waiters, in Redis Cluster: it hashes to the lock's slot.
func ShardedGrantChannel(lockKey, id string) string { return lockKey + ":grants:" + id }

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

// StampKey is the key of the mark that the stamp of the grant stamped (the
// refresh script with a token drawn from a source, internal/lease's
// tokens.go) leaves on the lock at key, for a resend of the same call: an
// EndedKey, named by a digest.
func StampKey(key, stamped string) string { return EndedKey(key, "stamp "+stamped) }

// LeaderKey is the key of the leader of the election whose lock is at
// lockKey, and the channel of its notices.
func LeaderKey(lockKey string) string { return lockKey + ":leader" }

// RegisterKey is the key of the fenced register of a resource.
func RegisterKey(prefix, resource string) string { return LockKey(prefix, resource) + ":register" }

// PermitsKey is the key of the permits of the semaphore called name, with
// its header (wire.go). Its queue (QueueKey) derives from it, in the slot
// of the lock of the same name, which is another resource.
func PermitsKey(prefix, name string) string { return LockKey(prefix, name) + ":permits" }

package lease

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// DefaultPrefix is the key prefix of both kinds of lock unless an option sets
// another.
const DefaultPrefix = "leasekit:"

// MinTTL is the shortest lease Redis can express (PX takes milliseconds).
const MinTTL = time.Millisecond

// LockKey is the Redis key of the lock called name. The hash tag keeps the lock
// and every key derived from it in one Redis Cluster slot.
func LockKey(prefix, name string) string { return prefix + "{" + name + "}" }

// FenceKey is the key of the fencing-token counter of the lock called name.
func FenceKey(prefix, name string) string { return CounterKey(LockKey(prefix, name)) }

// CounterKey is the key of the fencing-token counter of the lock at lockKey.
func CounterKey(lockKey string) string { return lockKey + ":fence" }

// WakeChannel is the pub/sub channel on which releases of the lock are
// announced to waiters that do not queue. release.lua builds the same name.
func WakeChannel(lockKey string) string { return lockKey + ":wake" }

// QueueKey is the key of the lock's wait queue (see scripts/wait.lua).
func QueueKey(lockKey string) string { return lockKey + ":queue" }

// GrantChannel is the pub/sub channel on which the Locker whose id is id hears
// the grants handed to its waiters.
func GrantChannel(prefix, id string) string { return prefix + "grants:" + id }

// RegisterKey is the key of the fenced register of a resource.
func RegisterKey(prefix, resource string) string { return LockKey(prefix, resource) + ":register" }

// CheckName reports whether name can name a lock or resource. An empty name is
// refused, and so is one starting with '}', which would give the key an empty
// hash tag and scatter a lock's keys over Redis Cluster slots.
func CheckName(invalid error, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty", invalid)
	case strings.HasPrefix(name, "}"):
		return fmt.Errorf("%w: the name %s starts with '}'", invalid, Quote(name))
	}
	return nil
}

// CheckTTL reports whether ttl is a lease length Redis can hold.
func CheckTTL(invalid error, ttl time.Duration) error {
	if ttl < MinTTL {
		return fmt.Errorf("%w: %v is shorter than %v", invalid, ttl, MinTTL)
	}
	return nil
}

// Millis is ttl in whole milliseconds, at least 1.
func Millis(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// ownerBytes is the entropy of an owner id: 128 bits.
const ownerBytes = 16

// NewOwner draws an owner id from src. A short read is an error: an owner id is
// what lets a holder release its lock, and a weak one would let another guess it.
func NewOwner(kind string, src io.Reader) (string, error) {
	if src == nil {
		src = rand.Reader
	}
	var b [ownerBytes]byte
	if src == rand.Reader {
		rand.Read(b[:]) // never fails, and b stays on the stack
	} else {
		// Read through a slice of its own: handing b to an interface
		// method would move b to the heap on the default path too.
		buf := make([]byte, ownerBytes)
		if _, err := io.ReadFull(src, buf); err != nil {
			return "", fmt.Errorf("%s: owner id source failed: %w", kind, err)
		}
		copy(b[:], buf)
	}
	var id [22]byte // base64.RawURLEncoding.EncodedLen(ownerBytes)
	base64.RawURLEncoding.Encode(id[:], b[:])
	return string(id[:]), nil
}

// Redact shows the first characters of an owner id, enough to tell two apart
// in a log, never enough to release a lock with.
func Redact(owner string) string {
	if len(owner) <= 4 {
		return "…"
	}
	return owner[:4] + "…"
}

// Quote quotes a name for an error message, cut short if it is long.
func Quote(name string) string {
	const most = 64
	if len(name) > most {
		return fmt.Sprintf("%q…(%d bytes)", name[:most], len(name))
	}
	return fmt.Sprintf("%q", name)
}

// DefaultDriftFactor is the share of a ttl kept in reserve for clock drift
// unless an option sets another.
const DefaultDriftFactor = 0.01

// DriftFactor clamps a drift factor option to [0, 0.5]; NaN, which no clamp
// catches, becomes the default.
func DriftFactor(f float64) float64 {
	if math.IsNaN(f) {
		return DefaultDriftFactor
	}
	return min(max(f, 0), 0.5)
}

package lease

import (
	"context"
	"strings"

	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Keys are the Redis keys of one lock, boxed once as script arguments:
// the lock, its wait queue and its fence counter, the KEYS of every script
// that may grant it (a release may hand an efficiency lock to a waiter that
// runs it as a correctness lock). Scripts that touch only the lock take the
// first. Built once per name and kept (see Core.lockKeys), they spare every
// acquire and release the allocations of building and boxing its keys.
type Keys struct {
	name string // the lock's name, as the caller passed it
	lock string
	keys []any
}

// newKeys returns the keys of the lock called name whose key is key.
func newKeys(name, key string) *Keys {
	return &Keys{name: name, lock: key, keys: []any{key, QueueKey(key), CounterKey(key)}}
}

// Lock is the lock's key.
func (k *Keys) Lock() string { return k.lock }

// Name is the lock's name.
func (k *Keys) Name() string { return k.name }

// Strings are the first n keys, as strings.
func (k *Keys) Strings(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = k.keys[i].(string)
	}
	return keys
}

// keyCacheSize bounds the lock names a Core keeps keys for. Locks are usually a
// few names used again and again; a caller that locks ever new names builds
// their keys afresh past this many, and memory stays bounded.
const keyCacheSize = 4096

// keyCacheNameLen is the longest name whose keys are kept, so that the cache
// stays small in bytes too: a caller locking ever new megabyte names does
// not pin gigabytes.
const keyCacheNameLen = 256

// lockKeys returns the keys of the lock called name.
func (c *Core) lockKeys(name string) *Keys {
	if lk, ok := c.names.Load(name); ok {
		return lk.(*Keys)
	}
	lk := newKeys(name, LockKey(c.cfg.Prefix, name))
	if len(name) <= keyCacheNameLen && c.cached.Load() < keyCacheSize {
		if _, loaded := c.names.LoadOrStore(name, lk); !loaded {
			c.cached.Add(1)
		}
	}
	return lk
}

// Script is a script with its SHA1 boxed once, as EVALSHA's argument.
type Script struct {
	sc   *redis.Script
	hash any
}

// NewScript returns sc ready for Run.
func NewScript(sc *redis.Script) Script { return Script{sc: sc, hash: sc.Hash()} }

var (
	releaseScript = NewScript(scripts.Release)
	waitScript    = NewScript(scripts.Wait)
	refreshScript = NewScript(scripts.Refresh)
	pttlScript    = NewScript(scripts.PTTL)
)

// Run runs s on the first n keys of lk with args: EVALSHA, and EVAL when the
// server does not have the script cached (after a restart or SCRIPT FLUSH),
// as redis.Script.Run does. The command is built here so that its keys and
// SHA1 go in already boxed, and only args cost allocations.
func (c *Core) Run(ctx context.Context, s Script, lk *Keys, n int, args ...any) *redis.Cmd {
	cmd := make([]any, 0, 3+n+len(args))
	cmd = append(cmd, "evalsha", s.hash, n)
	cmd = append(cmd, lk.keys[:n]...)
	cmd = append(cmd, args...)
	reply := c.cfg.Client.Do(ctx, cmd...)
	if err := reply.Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return reply
	}
	keys := lk.Strings(n)
	// A copy: go-redis keeps the slice, which would make every caller's
	// arguments escape.
	return s.sc.Eval(ctx, c.cfg.Client, keys, append([]any(nil), args...)...)
}

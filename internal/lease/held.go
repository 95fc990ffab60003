package lease

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Held is a granted lease.
type Held struct {
	core  *Core
	keys  *Keys
	value string
	token uint64

	mu       sync.Mutex
	deadline time.Time
	ttl      time.Duration // of the grant or the last Refresh
}

// TTLSet is the ttl of the grant or of the last successful Refresh.
func (h *Held) TTLSet() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ttl
}

// Key is the lock's Redis key.
func (h *Held) Key() string { return h.keys.lock }

// Token is the grant's fencing token (0 for efficiency locks).
func (h *Held) Token() uint64 { return h.token }

// Owner is the redacted owner id, for logs.
func (h *Held) Owner() string { return Redact(h.value) }

// Deadline is the conservative local expiry of the lease.
func (h *Held) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

func (h *Held) setDeadline(d time.Time) {
	h.mu.Lock()
	h.deadline = d
	h.mu.Unlock()
}

// Refresh restarts the lease at ttl if it is still held.
func (h *Held) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := CheckTTL(h.core.cfg.Errors.InvalidTTL, ttl); err != nil {
		return err
	}
	sent := time.Now()
	n, err := h.core.Run(ctx, refreshScript, h.keys, 1, h.value, Millis(ttl)).Int64()
	if err != nil {
		return WrapRedis("refresh", h.keys.lock, err)
	}
	if n != 1 {
		return h.notHeld()
	}
	h.mu.Lock()
	h.deadline, h.ttl = sent.Add(ttl-h.core.Drift(ttl)), ttl
	h.mu.Unlock()
	return nil
}

// Release ends the lease if it is still held: the lock goes to the first live
// waiter queued for it, or is deleted (and, from a Core whose waiters do not
// queue, a wake-up is published for such waiters).
func (h *Held) Release(ctx context.Context) error {
	released, err := h.core.release(ctx, h.keys, h.value, false, "")
	if err != nil {
		return WrapRedis("release", h.keys.lock, err)
	}
	h.setDeadline(time.Time{})
	if !released {
		return h.notHeld()
	}
	return nil
}

// notHeld is the error for a lease Redis no longer holds for this owner.
func (h *Held) notHeld() error {
	return fmt.Errorf("%w: %s expired or has another holder", h.core.cfg.Errors.NotHeld, Quote(h.keys.lock))
}

// TTL asks Redis how long the lease has left.
func (h *Held) TTL(ctx context.Context) (time.Duration, error) {
	ms, err := h.core.Run(ctx, pttlScript, h.keys, 1, h.value).Int64()
	if err != nil {
		return 0, WrapRedis("ttl", h.keys.lock, err)
	}
	switch {
	case ms == -2:
		return 0, h.notHeld()
	case ms < 0:
		return -1, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// release runs the release script for value (or, with prefix, any value that
// starts with it) on the lock, after taking the queue entry leaving (a waiter
// giving up) out of the lock's queue, if it is not "". It reports whether the
// grant was there to release.
func (c *Core) release(ctx context.Context, lk *Keys, value string, prefix bool, leaving string) (bool, error) {
	match := matchExact
	if prefix {
		match = matchPrefix
	}
	reply, err := c.Run(ctx, releaseScript, lk, 3, value, match, leaving, c.wake).Result()
	return err == nil && reply != int64(0), err
}

// The release script's match and wake arguments, boxed once.
var matchExact, matchPrefix, wakeOn, wakeOff any = "0", "1", "1", "0"

// kind is the lock's kind as the scripts name it (see scripts/grant.lua).
func (c *Core) kind() string {
	switch {
	case !c.cfg.Fenced:
		return "e"
	case c.cfg.ClockFloor:
		return "c"
	}
	return "f"
}

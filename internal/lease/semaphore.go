package lease

import (
	"context"
	"strconv"
	"time"

	"github.com/leasekit/leasekit/internal/telemetry"
)

// Semaphore is a counting semaphore run by a Core: at most its limit of
// permits are live at once, each a Held. Waiters queue and are handed
// permits as locks' waiters are (docs/semaphore.md).
type Semaphore struct {
	c    *Core
	keys *keySet
}

// Semaphore returns the semaphore called name with limit permits. A name or
// limit no semaphore can have fails every acquire with InvalidKey or
// InvalidLimit.
func (c *Core) Semaphore(name string, limit int) *Semaphore {
	o := &ops{what: "semaphore", sem: true, limit: limit, tel: c.semaphoreTelemetry(limit),
		tryOp: "TryAcquire", waitOp: "Acquire", arg: strconv.Itoa(limit),
		wait: semWaitScript, release: semReleaseScript, refresh: semRefreshScript, pttl: semPTTLScript}
	key := PermitsKey(c.cfg.Prefix, name)
	return &Semaphore{c: c, keys: &keySet{name: name, lock: key, keys: []any{key, QueueKey(key)}, ops: o}}
}

// Try makes one attempt to take a permit: one is granted when fewer than the
// limit are live once the waiters queued first have been served.
func (s *Semaphore) Try(ctx context.Context, ttl time.Duration) (*Held, error) {
	return s.c.try(ctx, s.keys, ttl)
}

// Obtain takes a permit, waiting in the semaphore's queue until one is
// handed over or ctx ends, as Core.Obtain waits for a lock.
func (s *Semaphore) Obtain(ctx context.Context, ttl time.Duration) (*Held, error) {
	return s.c.obtain(ctx, s.keys, ttl)
}

// Do takes a permit (waiting), runs fn while keeping it alive, and releases
// it, as Core.Do does with a lock.
func (s *Semaphore) Do(ctx context.Context, ttl time.Duration, fn func(context.Context, *Held) error) error {
	h, err := s.Obtain(ctx, ttl)
	if err != nil {
		return err
	}
	return h.HoldAs(ctx, "Do", fn)
}

// semaphoreTelemetry is the Telemetry of the Core's semaphores of limit
// permits, built once per limit.
func (c *Core) semaphoreTelemetry(limit int) *telemetry.Telemetry {
	if t, ok := c.semTel.Load(limit); ok {
		return t.(*telemetry.Telemetry)
	}
	t, _ := c.semTel.LoadOrStore(limit, c.cfg.Telemetry.Semaphore(limit))
	return t.(*telemetry.Telemetry)
}

package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
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
	o := &ops{what: "semaphore", limit: limit, tel: c.semaphoreTelemetry(limit),
		tryOp: "TryAcquire", waitOp: "Acquire", keys: permitScriptKeys, held: 2,
		attempt: takePermit, settle: settlePermits,
		wait: semWaitScript, release: semReleaseScript, pttl: semPTTLScript, refresh: (*Held).refreshPermit,
		arg: strconv.Itoa(limit), busy: (*keySet).permitsBusy, refused: (*Core).limitErr,
		keyOf: (*Core).permitKeyOf, checkGrant: (*waiter).checkPermit}
	if limit < 1 {
		o.invalid = fmt.Errorf("%w: %d is below 1", c.cfg.Errors.InvalidLimit, limit)
	}
	return &Semaphore{c: c, keys: newKeys(name, scripts.PermitsKey(c.cfg.Prefix, name), o)}
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

// What only a semaphore does, the fields of its ops.

// permitScriptKeys are the keys of the semaphore whose permits are at key:
// the permits (with the header) and the wait queue, the KEYS of all its
// scripts, and of a Held's too.
func permitScriptKeys(key string) []any { return []any{key, scripts.QueueKey(key)} }

// takePermit is a semaphore's lone attempt: its acquire script serves the
// waiters queued first, always. A probe need not know whether the caller
// holds a permit already: its wait finds out.
func takePermit(a acquire, probe bool) (found, error) {
	if probe {
		return a.runGrant(semAcquireScript, a.readWait, a.owner, Millis(a.ttl), a.keys.ops.arg, a.c.listen.channels, isProbe)
	}
	return a.runGrant(semAcquireScript, a.readWait, a.owner, Millis(a.ttl), a.keys.ops.arg, a.c.listen.channels)
}

// settlePermits goes on serving the queue: a lone attempt again.
func settlePermits(a acquire) (found, error) { return takePermit(a, false) }

// refreshPermit restarts the ttl of the permit h.
func (h *Held) refreshPermit(ctx context.Context, ttl time.Duration) *redis.Cmd {
	return h.core.run(ctx, semRefreshScript, h.keys.held(), h.value, Millis(ttl))
}

// permitsBusy says why a lone attempt found no permit free.
func (k *keySet) permitsBusy() string {
	return fmt.Sprintf("semaphore %s: all %d permits are held", Quote(k.name), k.ops.limit)
}

// limitErr is the error of a semaphore's script that found its live
// permits granted under another limit, matching LimitMismatch; nil for any
// other.
func (c *Core) limitErr(lk *keySet, err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		if other, ok := scripts.OtherLimit(re.Error()); ok {
			return fmt.Errorf("%w: %s has permits live under limit %s, and this Semaphore's limit is %d",
				c.cfg.Errors.LimitMismatch, lk.label(), other, lk.ops.limit)
		}
	}
	return nil
}

// permitKeyOf is the key that err, a failure of a script on the semaphore
// at lk, is about: for a script that met a key of another type (WRONGTYPE,
// which names no key), the one of its keys that holds another type, found
// in one more round trip; else its permits'.
func (c *Core) permitKeyOf(ctx context.Context, lk *keySet, err error) string {
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		return lk.lock
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	pipe := c.cfg.Client.Pipeline()
	cards := make([]*redis.IntCmd, len(lk.keys))
	for i, k := range lk.keys {
		cards[i] = pipe.ZCard(ctx, k.(string)) // every key of a semaphore is a sorted set
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	for i, cmd := range cards {
		if redis.HasErrorPrefix(cmd.Err(), "WRONGTYPE") {
			return lk.keys[i].(string)
		}
	}
	return lk.lock
}

// checkPermit is the error of a grant message that hands w a permit
// granted under another limit than its own, matching LimitMismatch: the
// permits live were granted under the other. A message that names no limit
// is taken.
func (w *waiter) checkPermit(m scripts.Message) error {
	if limit := w.keys.ops.limit; m.Limit != 0 && m.Limit != limit {
		return fmt.Errorf("%w: %s was handed a permit granted under limit %d, and this Semaphore's limit is %d",
			w.c.cfg.Errors.LimitMismatch, w.keys.label(), m.Limit, limit)
	}
	return nil
}

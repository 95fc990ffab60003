package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/port"
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
	p := &permits{c: c, limit: limit, limitArg: strconv.Itoa(limit), tel: c.semaphoreTelemetry(limit)}
	if limit < 1 {
		p.err = fmt.Errorf("%w: %d is below 1", c.cfg.Errors.InvalidLimit, limit)
	}
	key := scripts.PermitsKey(c.cfg.Prefix, name)
	var keyArg, queue any = key, scripts.QueueKey(key)
	return &Semaphore{c: c, keys: &keySet{name: name, key: key, keyArg: keyArg, keys: []any{keyArg, queue}, kind: p}}
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

// permits is the kind of a semaphore's permits: at most limit are live at
// once. Its keys are the permits (with the header) and the wait queue, the
// KEYS of all its scripts, and of a Held's too.
type permits struct {
	c        *Core
	limit    int
	limitArg any // limit in decimal, boxed once: its scripts' ARGV[3]
	tel      *telemetry.Telemetry
	err      error // of every acquire, for a limit below 1
}

var _ kind = (*permits)(nil)

// what is "semaphore".
func (*permits) what() string { return "semaphore" }

// telemetry is the Core's, for semaphores of the limit.
func (p *permits) telemetry() *telemetry.Telemetry { return p.tel }

// spans are TryAcquire and Acquire.
func (*permits) spans() (try, wait string) { return "TryAcquire", "Acquire" }

// invalid is the error of a limit below 1, or nil.
func (p *permits) invalid() error { return p.err }

// waitScript is sem_wait.lua, with the limit.
func (p *permits) waitScript() (Script, any) { return semWaitScript, p.limitArg }

// releaseScript is sem_release.lua.
func (*permits) releaseScript() Script { return semReleaseScript }

// attempt is the acquire script, which serves the waiters queued first,
// always. A probe need not know whether the caller holds a permit
// already: its wait finds out.
func (p *permits) attempt(a acquire, probe bool) (found, error) {
	if probe {
		return a.runGrant(semAcquireScript, a.readWait, a.owner, Millis(a.ttl), p.limitArg, a.c.listen.channels, isProbe)
	}
	return a.runGrant(semAcquireScript, a.readWait, a.owner, Millis(a.ttl), p.limitArg, a.c.listen.channels)
}

// settle goes on serving the queue: a lone attempt again.
func (p *permits) settle(a acquire) (found, error) { return p.attempt(a, false) }

// refresh restarts the ttl of the permit h; a permit leads no election.
func (p *permits) refresh(ctx context.Context, h *Held, ttl time.Duration, _ string) (any, error) {
	return p.c.run(ctx, semRefreshScript, h.keys.keys, h.value, Millis(ttl))
}

// pttl runs sem_pttl.lua.
func (p *permits) pttl(ctx context.Context, h *Held) (any, error) {
	return p.c.run(ctx, semPTTLScript, h.keys.keys, h.value)
}

// busy says every permit is held.
func (p *permits) busy(lk *keySet) string {
	return fmt.Sprintf("semaphore %s: all %d permits are held", Quote(lk.name), p.limit)
}

// refused is the error of a semaphore's script that found its live permits
// granted under another limit, matching LimitMismatch; nil for any other.
func (p *permits) refused(lk *keySet, err error) error {
	var re port.ServerError
	if errors.As(err, &re) {
		if other, ok := scripts.OtherLimit(re.Error()); ok {
			return fmt.Errorf("%w: %s has permits live under limit %s, and this Semaphore's limit is %d",
				p.c.cfg.Errors.LimitMismatch, lk.label(), other, p.limit)
		}
	}
	return nil
}

// keyOf is, for a script that met a key of another type (WRONGTYPE, which
// names no key), the one of its keys that holds another type, found in one
// more round trip; else its permits'.
func (p *permits) keyOf(ctx context.Context, lk *keySet, err error) string {
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		return lk.key
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	queue := scripts.QueueKey(lk.key)
	// Every key of a semaphore is a sorted set.
	cards := p.c.cfg.Conn.Pipe(ctx, lk.key, []any{"ZCARD", lk.key}, []any{"ZCARD", queue})
	switch {
	case redis.HasErrorPrefix(cards[0].Err, "WRONGTYPE"):
		return lk.key
	case redis.HasErrorPrefix(cards[1].Err, "WRONGTYPE"):
		return queue
	}
	return lk.key
}

// checkGrant is the error of a grant message that hands w a permit granted
// under another limit than its own, matching LimitMismatch: the permits
// live were granted under the other. A message that names no limit is
// taken.
func (p *permits) checkGrant(w *waiter, m scripts.Message) error {
	if m.Limit != 0 && m.Limit != p.limit {
		return fmt.Errorf("%w: %s was handed a permit granted under limit %d, and this Semaphore's limit is %d",
			w.c.cfg.Errors.LimitMismatch, w.keys.label(), m.Limit, p.limit)
	}
	return nil
}

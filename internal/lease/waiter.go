package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
)

// recheck bounds how long a waiter goes without asking Redis: handoffs and
// wake-ups are the fast path, never the only one (docs/waiting.md).
const recheck = time.Second

// Obtain acquires the lock called name, waiting until it is free or ctx
// ends, as docs/waiting.md describes. After maxLateGrants grants in a row
// whose replies came past their lease deadline (a ttl too short for the
// link) it gives up with Late.
func (c *Core) Obtain(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	return c.obtain(ctx, c.lockKeys(name), ttl)
}

// obtain acquires the lock or a permit of the semaphore at lk, waiting.
func (c *Core) obtain(ctx context.Context, lk *keySet, ttl time.Duration) (*Held, error) {
	_, op := lk.kind.spans()
	ctx, t := lk.kind.telemetry().StartAcquire(ctx, op, lk.name)
	a, err := c.begin(ctx, lk, ttl)
	var h *Held
	if err == nil {
		h, err = a.obtain(&t)
	}
	t.End(c.outcome(err), err)
	return h, err
}

func (a *acquire) obtain(t *telemetry.Acquire) (*Held, error) {
	early := a.c.listen.joinEarly(a.ctx, a.keys)
	h, _, err := a.once(true)
	switch {
	case h != nil:
		early.drop()
		return h, nil
	case err != nil && errors.Is(err, a.c.cfg.Errors.Late):
		// Released already: wait like any other waiter.
	case err != nil && slotMoving(err) && a.ctx.Err() == nil:
		// The lock's slot is migrating, longer than the probe waited: the
		// waiter's attempts wait it out, as any failure that may pass.
	case err != nil:
		early.drop()
		return nil, a.failed(err)
	}
	a.keys.contended()
	w, err := a.join(early)
	if err != nil {
		return nil, err
	}
	w.tel = t
	h, err = w.wait()
	if h != nil && w.handedOver {
		// Before the waiter leaves its channel: a message for it after
		// that goes to the strays, which must know what it took.
		w.c.strays.took(&w.acquire, w.entry, h)
	}
	w.leave(h != nil)
	return h, err
}

// waiter is an acquire that waits for a lock its probe found held.
type waiter struct {
	acquire
	sub *notify.Waiter // nil when releases could not be subscribed
	// entry is the waiter's queue entry; nil when its Locker's waiters do
	// not queue.
	entry  *entry
	woken  bool // the last sleep ended with a wake-up
	unsure bool // an attempt's reply was lost: Redis may have granted it
	late   int  // grants in a row that came back past their deadline
	// handedOver says the lease came in a grant message (see strays.took).
	handedOver bool
	failures   int // attempts in a row that Redis failed
	tel        *telemetry.Acquire
}

// join subscribes the waiter to what tells it of a release (listen.go), or
// takes the subscription that early (if not nil) made while the probe ran.
func (a *acquire) join(early *pendingJoin) (*waiter, error) {
	w := &waiter{acquire: *a}
	var sub *notify.Waiter
	var id string
	var err error
	if early != nil {
		sub, id, err = early.result()
	} else {
		sub, id, err = a.c.listen.join(a.ctx, a.keys)
	}
	switch {
	case err == nil:
		w.sub = sub
		if id != "" {
			w.entry = w.newEntry(id, sub.Channel())
		}
	case a.ctx.Err() != nil:
		return nil, a.c.notObtained(a.keys, a.ctx.Err())
	case errors.Is(err, notify.ErrClosed):
		return nil, a.c.closedWhileWaiting(a.keys)
	default:
		a.c.logger().Warn(a.c.cfg.Kind+": cannot subscribe to lock releases; checking the lock every second instead",
			"lock", a.keys.name, "err", err)
	}
	return w, nil
}

// wait tries for the lock until it is the waiter's, ctx ends, or an attempt
// fails for good, sleeping between attempts.
func (w *waiter) wait() (*Held, error) {
	for w.late < maxLateGrants {
		if w.c.closed.Load() {
			return nil, w.c.closedWhileWaiting(w.keys)
		}
		h, f, err := w.attempt()
		if err != nil {
			var again bool
			if again, err = w.failure(err); !again {
				return nil, err
			}
			if err != nil {
				continue // a late grant, released already: try again now
			}
			f.holderTTL = recheck
		} else {
			w.late, w.failures = 0, 0
		}
		if h != nil {
			return h, nil
		}
		if f.settle {
			continue // dead entries ahead: go on serving the queue at once
		}
		w.tel.Wait() // counted among the waiters from its first sleep
		if h, err := w.sleep(f.holderTTL); h != nil || err != nil {
			return h, err
		}
	}
	return nil, fmt.Errorf("%w: %s: %d grants in a row came back after their lease deadline (ttl %v): "+
		"the ttl is too short for the round trip to Redis", w.c.cfg.Errors.Late, w.keys.label(), w.late, w.ttl)
}

// attempt runs the wait script once: it takes the lock if it is free, or
// keeps the waiter's entry queued, or queues it (again, at its place, with
// the next generation, when the entry left the queue without a grant the
// waiter could use), or only marks the lock.
func (w *waiter) attempt() (*Held, found, error) {
	sent := time.Now()
	queue, place, prev := w.entryArgs()
	// ARGV[7], the kind of grant channels, is for the grants the attempt
	// may hand to the live waiters ahead of this one (a free lock, a lapsed
	// lease, free permits).
	script, arg := w.keys.kind.waitScript()
	f, err := w.runGrant(script, w.readWait, w.owner, Millis(w.ttl), arg, queue, place, prev, w.c.listen.channels)
	if err != nil {
		if e := w.entry; e != nil {
			e.server = math.MaxInt64 // no grant message is sure until an attempt succeeds
		}
		return nil, f, w.c.acquireErr(w.ctx, w.keys, err)
	}
	if f.granted {
		h, err := w.lease(f, sent)
		return h, f, err
	}
	if e := w.entry; e != nil && f.place != "" {
		if f.queued && e.place != "" {
			e.gen++
		}
		e.place, e.sent, e.server = f.place, sent, f.server
		if f.queued {
			w.tel.Event("queued")
		}
	}
	return nil, f, nil
}

// entryArgs are the wait script's ARGV[4..6]: the entry to queue, and the
// place and text of the waiter's previous entry.
func (w *waiter) entryArgs() (queue, place, prev any) {
	e := w.entry
	switch {
	case e == nil:
		return "", "", ""
	case e.place == "":
		return e.text(e.gen), "", ""
	}
	return e.text(e.gen + 1), e.place, e.text(e.gen)
}

// readWait reads the reply of the wait script, or of a semaphore's acquire
// or wait.
func (a *acquire) readWait(r any) (found, error) {
	at, err := scripts.ReadAttempt(r)
	if err != nil {
		return found{}, err
	}
	return a.attempted(at)
}

// failure reads an attempt's error: whether to try again (a late grant, or a
// failure of Redis that may pass), and the error otherwise.
func (w *waiter) failure(err error) (again bool, _ error) {
	w.unsure = w.unsure || mayHaveGranted(err)
	switch {
	case w.ctx.Err() != nil:
		return false, w.c.notObtained(w.keys, w.ctx.Err(), err)
	case errors.Is(err, w.c.cfg.Errors.Late):
		w.late++
		w.tel.Event("late grant")
		return true, err
	case w.c.cfg.Tokens != nil && errors.Is(err, w.c.cfg.Errors.NoToken), !transient(err):
		// A token source that timed out is no failure of Redis to wait out.
		return false, err
	}
	if w.failures++; w.failures == 1 {
		w.c.logger().Warn(w.c.cfg.Kind+": Redis failed while waiting for a lock; trying again every second until the context ends",
			"lock", w.keys.name, "err", err)
	}
	return true, nil
}

// sleep waits for a wake-up, the holder's ttl to run out, the next recheck,
// or ctx to end. A wake-up that brings the lock handed over returns the lease.
func (w *waiter) sleep(holderTTL time.Duration) (*Held, error) {
	d := recheck
	if holderTTL >= 0 {
		d = min(holderTTL, recheck)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var wake, closed <-chan struct{}
	if w.sub != nil {
		wake, closed = w.sub.Wake(), w.sub.Done()
	}
	w.woken = false
	select {
	case <-t.C:
		return nil, nil
	case <-closed:
		return nil, w.c.closedWhileWaiting(w.keys)
	case <-w.ctx.Done():
		return nil, w.c.notObtained(w.keys, w.ctx.Err())
	case <-wake:
	}
	w.woken = true
	w.tel.Event("woken")
	if w.entry == nil {
		return nil, nil
	}
	msg, ok := w.sub.Grant()
	if !ok {
		return nil, nil
	}
	h, err := w.handed(msg)
	if err != nil && errors.Is(err, w.c.cfg.Errors.Late) {
		w.late++ // released already; the next attempt tries again
		w.tel.Event("late grant")
		return nil, nil
	}
	if h != nil {
		w.tel.Event("handed over")
		w.handedOver = true
	}
	return h, err
}

// handed turns a grant message into the lease. Only a grant to the waiter's
// current entry, made after its latest attempt, is the one it waits for: a
// message for an earlier entry, or from before that attempt, reports a grant
// that attempt would have found the waiter's own had it still been held, so
// it is over; such a message is no grant (nil), and the caller asks Redis
// again. So is one that does not parse (a release of another version).
func (w *waiter) handed(msg string) (*Held, error) {
	m, ok := scripts.ParseMessage(msg)
	e := w.entry
	if !ok || m.Gen != e.gen || m.At < e.server {
		return nil, nil
	}
	if err := w.keys.kind.checkGrant(w, m); err != nil {
		w.logUnreleased(w.release(m.Value(w.owner)))
		return nil, err
	}
	f, err := w.granted(m.Value(w.owner))
	if err == nil && w.c.cfg.Replicas > 0 {
		var held bool
		if held, err = w.confirm(f.value); err == nil && !held {
			return nil, nil // gone already: the next attempt settles it
		}
	}
	if err != nil {
		w.logUnreleased(w.release(m.Value(w.owner)))
		return nil, w.c.acquireErr(w.ctx, w.keys, err)
	}
	h, err := w.lease(f, grantStart(m, e))
	if h != nil {
		h.handed = e
	}
	return h, err
}

// leave ends the wait. A waiter that did not get the lock leaves the queue,
// releasing the lock if it was handed over meanwhile or granted by an attempt
// whose reply was lost; when Redis cannot be reached for that, its Locker
// takes over (strays.go). A wake-up it took but did not use goes to the next
// waiter of its Locker, which would otherwise sleep out the holder's ttl.
func (w *waiter) leave(granted bool) {
	if !granted && (w.entry != nil || w.unsure) {
		if err := w.releaseAny(w.entry); err != nil && w.entry != nil {
			w.c.strays.add(&w.acquire, w.entry)
		} else if err != nil {
			w.c.logger().Warn(w.c.cfg.Kind+": a waiter gave up and could not release what Redis may have granted it; that expires with its ttl",
				"lock", w.keys.name, "owner", redact(w.owner), "err", err)
		}
	}
	if w.sub == nil {
		return
	}
	if !granted && w.woken && w.entry == nil {
		w.sub.PassWake()
	}
	// Grants it did not take: of a wait that ended, or beside the one it
	// took (one of the two was forged). The strays release each that is
	// not the waiter's lease (strays.heard).
	for _, msg := range w.sub.Leave() {
		w.c.strays.heard(msg)
	}
}

// closedWhileWaiting is the error of a wait that its Locker's Close ended.
func (c *Core) closedWhileWaiting(lk *keySet) error {
	return fmt.Errorf("%w: %s: the Locker was closed while waiting for it", c.cfg.Errors.Closed, lk.label())
}

// confirm waits for Replicas to confirm a grant stored as value that another
// holder's release handed to this waiter, and reports whether the waiter
// still holds it. WAIT counts the replicas that have every write of its
// connection, and the handoff was the releaser's write: so the waiter writes
// first, in the same round trip (the refresh script restarts its ttl), after
// the handoff in the replication stream. Fewer replicas is an error matching
// NotReplicated.
func (w *waiter) confirm(value string) (bool, error) {
	c := w.c
	reply, confirmed, err := c.runConfirmed(w.ctx, refreshScript, []any{w.keys.keyArg}, value, Millis(w.ttl))
	if err != nil {
		return false, err
	}
	if r, err := scripts.ReadRefresh(reply); err != nil || r.Lease != scripts.LeaseHeld {
		return false, err
	}
	if confirmed < int64(c.cfg.Replicas) {
		return true, namesLock(fmt.Errorf("%w: %s: %d of %d replicas confirmed the handed grant within %v",
			c.cfg.Errors.NotReplicated, w.keys.label(), confirmed, c.cfg.Replicas, c.cfg.ReplicaWait))
	}
	return true, nil
}

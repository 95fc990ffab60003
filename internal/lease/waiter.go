package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/leasekit/leasekit/internal/telemetry"
)

// recheck bounds how long a waiter goes without asking Redis. Handoffs and
// wake-ups are the fast path, never the only one: whatever was lost (the
// queue after a restart or failover, a message while the subscription
// reconnected, a holder's key without expiry deleted by hand), a waiter finds
// a free lock within this long.
const recheck = time.Second

// Obtain acquires the lock called name, waiting until it is free or ctx ends.
//
// It first probes, as cheaply as a TryObtain: a free lock costs one round trip
// and no subscription, and a Redis that cannot be reached is an error at once.
// When the lock is held, the waiter subscribes (and waits for the
// confirmation) before it tries again, so that nothing the holder does after
// the failed probe goes unheard. On a single server and on a Redis 7 cluster
// that try queues the waiter, and the holder's release hands the lock
// straight to the first live waiter and tells it so: the handoff costs no
// round trip of the waiter's own (one, to WAIT, with Replicas). Where waiters
// cannot queue (see New) the try marks the lock, and its release wakes one
// waiter per Locker, which tries again. Either
// way a waiter also tries again when the holder's ttl runs out, and at least
// every recheck; and it rides out Redis failures (a restart, a failover)
// until ctx ends. After maxLateGrants grants in a row whose replies came past
// their lease deadline (a ttl too short for the link) it gives up with Late.
func (c *Core) Obtain(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	ctx, t := c.cfg.Telemetry.StartAcquire(ctx, c.cfg.WaitOp, name)
	h, err := c.obtain(ctx, name, ttl, &t)
	t.End(c.outcome(err), err)
	return h, err
}

func (c *Core) obtain(ctx context.Context, name string, ttl time.Duration, t *telemetry.Acquire) (*Held, error) {
	lk, owner, err := c.begin(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	h, _, err := c.attempt(ctx, lk, owner, ttl, Probe, "", 0)
	switch {
	case h != nil:
		return h, nil
	case err != nil && errors.Is(err, c.cfg.Errors.Late):
		// Released already: wait like any other waiter.
	case err != nil:
		return nil, c.failed(ctx, lk, owner, ttl, err)
	}
	w, err := c.join(ctx, lk, owner, ttl)
	if err != nil {
		return nil, err
	}
	w.tel = t
	h, err = w.wait()
	w.leave(h != nil)
	return h, err
}

// waiter is one Obtain's wait for a lock its probe found held.
type waiter struct {
	c     *Core
	ctx   context.Context
	lk    *Keys
	owner string
	ttl   time.Duration
	sub   *notify.Waiter // nil when wake-ups could not be subscribed
	// entry is the waiter's queue entry (handoff.go); "" when its Locker's
	// waiters do not queue.
	entry  string
	place  int64     // the entry's place in the queue, once an attempt queued it
	queued time.Time // when that attempt was sent
	woken  bool      // the last sleep ended with a wake-up
	unsure bool      // an attempt's reply was lost: Redis may have granted it
	late   int       // grants in a row that came back past their deadline
	failed int       // attempts in a row that Redis failed
	tel    *telemetry.Acquire
}

// join subscribes the waiter to what tells it of a release: its Locker's
// grant channel (on a cluster, its Locker's sharded channel of this lock),
// where a random ticket names it in place of its secret owner id, when it
// queues; the lock's wake-up channel when it does not.
func (c *Core) join(ctx context.Context, lk *Keys, owner string, ttl time.Duration) (*waiter, error) {
	w := &waiter{c: c, ctx: ctx, lk: lk, owner: owner, ttl: ttl}
	channel, ticket := WakeChannel(lk.lock), ""
	switch {
	case c.grants != "":
		channel, ticket = c.grants, rand.Text()
	case c.sharded.Load():
		channel, ticket = ShardedGrantChannel(lk.lock, c.id), rand.Text()
	}
	sub, err := c.notifier.Join(ctx, channel, ticket)
	if err != nil && c.grants == "" && ticket != "" && strings.Contains(err.Error(), "unknown command") {
		c.stopSharding(err)
		channel, ticket = WakeChannel(lk.lock), ""
		sub, err = c.notifier.Join(ctx, channel, ticket)
	}
	switch {
	case err == nil:
		w.sub = sub
		if ticket != "" {
			w.entry = newEntry(owner, ttl, c.Kind(), ticket, channel)
		}
	case ctx.Err() != nil:
		return nil, c.notObtained(lk.name, ctx.Err())
	case errors.Is(err, notify.ErrClosed):
		return nil, c.closedWhileWaiting(lk)
	default:
		c.logger().Warn(c.cfg.Kind+": cannot subscribe to lock releases; checking the lock every second instead",
			"lock", lk.name, "err", err)
	}
	return w, nil
}

// wait tries for the lock until it is the waiter's, ctx ends, or an attempt
// fails for good, sleeping between attempts.
func (w *waiter) wait() (*Held, error) {
	for w.late < maxLateGrants {
		if w.c.closed.Load() {
			return nil, w.c.closedWhileWaiting(w.lk)
		}
		sent := time.Now()
		h, a, err := w.c.attempt(w.ctx, w.lk, w.owner, w.ttl, Wait, w.entry, w.place)
		if err != nil {
			var again bool
			if again, err = w.failure(err); !again {
				return nil, err
			}
			if err != nil && errors.Is(err, w.c.cfg.Errors.Late) {
				continue // released already: try again now
			}
			a.HolderTTL = recheck
		} else {
			w.late, w.failed = 0, 0
		}
		switch {
		case h != nil:
			return h, nil
		case a.Place != 0:
			w.place, w.queued = a.Place, sent
			w.tel.Event("queued")
		}
		w.tel.Wait() // counted among the waiters from its first sleep: queued, if it queues
		if h, err := w.sleep(a.HolderTTL); h != nil || err != nil {
			return h, err
		}
	}
	return nil, fmt.Errorf("%w: lock %s: %d grants in a row came back after their lease deadline (ttl %v): "+
		"the ttl is too short for the round trip to Redis", w.c.cfg.Errors.Late, Quote(w.lk.name), w.late, w.ttl)
}

// failure reads an attempt's error: whether to try again (a late grant, or a
// failure of Redis that may pass), and the error otherwise.
func (w *waiter) failure(err error) (again bool, _ error) {
	w.unsure = w.unsure || mayHaveGranted(err)
	switch {
	case w.ctx.Err() != nil:
		return false, w.c.notObtained(w.lk.name, w.ctx.Err(), err)
	case errors.Is(err, w.c.cfg.Errors.Late):
		w.late++
		w.tel.Event("late grant")
		return true, err
	case !transient(err):
		return false, err
	}
	if w.failed++; w.failed == 1 {
		w.c.logger().Warn(w.c.cfg.Kind+": Redis failed while waiting for a lock; trying again every second until the context ends",
			"lock", w.lk.name, "err", err)
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
		return nil, w.c.closedWhileWaiting(w.lk)
	case <-w.ctx.Done():
		return nil, w.c.notObtained(w.lk.name, w.ctx.Err())
	case <-wake:
	}
	w.woken = true
	w.tel.Event("woken")
	if w.entry == "" {
		return nil, nil
	}
	msg, ok := w.sub.Grant()
	if !ok {
		return nil, nil
	}
	h, err := w.c.handed(w.ctx, w.lk, w.owner, w.ttl, msg, w.place, w.queued)
	if err != nil && errors.Is(err, w.c.cfg.Errors.Late) {
		w.late++ // released already; the next attempt tries again
		w.tel.Event("late grant")
		return nil, nil
	}
	if h != nil {
		w.tel.Event("handed over")
	}
	return h, err // neither: a stale message, and the next attempt settles it
}

// leave ends the wait. A waiter that did not get the lock leaves the queue and
// releases the lock if it was handed over meanwhile, or granted by an attempt
// whose reply was lost; and a wake-up it took but did not use goes to the
// next waiter of its Locker, which would otherwise sleep out the holder's ttl.
func (w *waiter) leave(granted bool) {
	if !granted && (w.entry != "" || w.unsure) {
		w.c.abandon(w.ctx, w.lk, w.owner, w.ttl, w.entry)
	}
	if w.sub == nil {
		return
	}
	if !granted && w.woken && w.entry == "" {
		w.sub.Unused()
	}
	w.sub.Leave()
}

// closedWhileWaiting is the error of a wait that its Locker's Close ended.
func (c *Core) closedWhileWaiting(lk *Keys) error {
	return fmt.Errorf("%w: lock %s: the Locker was closed while waiting for it", c.cfg.Errors.Closed, Quote(lk.name))
}

package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
)

// releaseTimeout bounds the release at the end of Do, Hold and Once, which
// runs even when the caller's ctx has ended (or fn panicked) so that a lock
// is not left to expire.
const releaseTimeout = 5 * time.Second

// Do obtains the lock called name (waiting), runs fn while keeping the lease
// alive, and releases it. fn's context is cancelled with a cause matching
// Errors.LockLost as soon as the lease can no longer be confirmed before its
// deadline; Do's error then matches LockLost too. fn must not be nil (the
// faces refuse one with an error of their own).
func (c *Core) Do(ctx context.Context, name string, ttl time.Duration, fn func(context.Context, *Held) error) error {
	h, err := c.Obtain(ctx, name, ttl)
	if err != nil {
		return err
	}
	return h.HoldAs(ctx, "Do", fn)
}

// Hold runs fn while refreshing the lease every third of its ttl (the ttl of
// the grant or of the last Refresh), then releases it, on a context of its
// own (ctx may have ended). fn's context is cancelled with a cause matching
// Errors.LockLost as soon as the lease can no longer be confirmed before its
// deadline; Hold's error then matches LockLost. If fn panics, the refreshes
// stop, the lock is released, and the panic goes on up the stack.
func (h *Held) Hold(ctx context.Context, fn func(context.Context, *Held) error) error {
	return h.HoldAs(ctx, "Hold", fn)
}

// HoldAs is Hold, traced as op: Do or Hold.
func (h *Held) HoldAs(ctx context.Context, op string, fn func(context.Context, *Held) error) (err error) {
	if h.isReleased() || !time.Now().Before(h.Deadline()) {
		return fmt.Errorf("%w: %s: the lease was released or is past its deadline", h.core.cfg.Errors.NotHeld, h.keys.label())
	}
	ctx, span := h.keys.kind.telemetry().Start(ctx, op, h.keys.name)
	ttl := h.ttlSet()
	var fnErr, lost error
	defer func() {
		err = h.endHold(ctx, fnErr, lost)
		telemetry.End(span, err)
	}()
	fnErr, lost = h.run(ctx, ttl/3, func(time.Time) time.Duration { return ttl }, fn)
	return nil
}

// endHold releases the lease after Hold's fn and returns Hold's error.
func (h *Held) endHold(ctx context.Context, fnErr, lost error) error {
	if h.isReleased() {
		return fnErr // fn ended the lease itself, with Release
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	n, err := h.release(ctx)
	return h.holdErr(fnErr, lost, ending{n, err, "when fn returned"})
}

// Once runs fn at most once per period across every Locker sharing the Redis:
// the first caller takes the lock for period and runs fn; the others return
// false. A grant whose reply came after its deadline was released, so nobody
// runs fn for it: that is an error (Errors.Late), not a skip. The lock is not
// released when fn returns inside the period, so a late caller for the same
// tick skips; it is kept alive while fn runs past the period, and released as
// soon as such a long run ends. A panic in fn ends the run as a return would,
// and goes on up the stack.
func (c *Core) Once(ctx context.Context, name string, period time.Duration, fn func(context.Context, *Held) error) (ran bool, err error) {
	h, err := c.Try(ctx, name, period)
	if errors.Is(err, c.cfg.Errors.NotObtained) && ctx.Err() == nil {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	end := time.Now().Add(period)
	// While fn runs, keep the key at least until the period ends, and at least
	// half a period ahead once it has ended.
	next := func(now time.Time) time.Duration { return max(end.Sub(now), period/2, minTTL) }
	ctx, span := c.cfg.Telemetry.Start(ctx, "Once", name)
	var fnErr, lost error
	defer func() {
		err = h.endOnce(ctx, end, fnErr, lost)
		telemetry.End(span, err)
	}()
	fnErr, lost = h.run(ctx, period/3, next, fn)
	return true, nil
}

// endOnce ends a run of Once: the lock is kept until the period's end, or
// released if that has passed, and returns Once's error.
func (h *Held) endOnce(ctx context.Context, end time.Time, fnErr, lost error) error {
	// Even after a loss: a refresh that landed late may have kept the key,
	// and it must not outlive the period, or the next tick would skip.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var n scripts.LeaseState
	var err error
	if left := time.Until(end); left >= minTTL {
		n, err = h.refresh(ctx, left)
		if err == nil {
			h.recordEnd(ctx, n != scripts.LeaseHeld, lostReason(n)) // the run is over: the hold too
		}
	} else {
		n, err = h.release(ctx)
	}
	return h.holdErr(fnErr, lost, ending{n, err, "when the run ended"})
}

// ending is what the release or refresh that ended a hold found: its reply
// n, or err, and when it ran.
type ending struct {
	n    scripts.LeaseState
	err  error
	when string
}

// holdErr is a hold's error: fn's, the loss seen while fn ran, and how the
// hold ended.
func (h *Held) holdErr(fnErr, lost error, e ending) error {
	switch {
	case lost != nil:
		return lostWith(lost, fnErr)
	case e.err != nil:
		return join(fnErr, e.err)
	case e.n != scripts.LeaseHeld:
		return join(fnErr, h.core.lost(h, e.when+", "+h.core.why(e.n)))
	}
	return fnErr
}

// lostWith is the error of a hold whose lease was lost while fn ran: lost,
// and fn's error unless it only repeats that (fn returned its context's
// error or cause).
func lostWith(lost, fnErr error) error {
	if fnErr == nil || errors.Is(fnErr, context.Canceled) || errors.Is(fnErr, lost) {
		return lost
	}
	return fmt.Errorf("%w; fn returned: %w", lost, fnErr)
}

func (c *Core) lost(h *Held, why string) error {
	return fmt.Errorf("%w: %s: %s", c.cfg.Errors.LockLost, h.keys.label(), why)
}

// run calls fn with a context that is cancelled when the lease is lost, while a
// goroutine refreshes the lease every interval to the ttl next returns. It
// returns fn's error and, if the lease was lost, why. The refreshes stop when
// fn returns or panics.
func (h *Held) run(ctx context.Context, interval time.Duration, next func(time.Time) time.Duration, fn func(context.Context, *Held) error) (fnErr, lost error) {
	fnCtx, cancel := context.WithCancelCause(ctx)
	k := &keeper{h: h, ctx: fnCtx, cancel: cancel, stop: make(chan struct{}), interval: max(interval, minTTL), next: next}
	fnCtx = &leaseContext{Context: fnCtx, k: k}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		k.keepAlive()
	}()
	defer func() {
		close(k.stop)
		<-stopped
		if p := k.loss.Load(); p != nil {
			lost = *p
		}
		cancel(nil)
	}()
	return fn(fnCtx, h), nil
}

// leaseContext is the context a hold gives fn. Whenever fn asks it whether
// it is done (Done, Err, or context.Cause, which goes through Value), it
// first compares the lease's deadline with this process's clock, and is
// cancelled with a LockLost cause if the deadline has passed. The keeper's
// timer cancels it too, but a process paused past the deadline (SIGSTOP, a
// long GC, a VM migration) can run fn's next lines before the keeper's
// goroutine after it resumes; this check closes that window for every look
// fn takes at its own context. A context derived from it learns of the loss
// when the keeper cancels it.
type leaseContext struct {
	context.Context
	k *keeper
}

func (c *leaseContext) Done() <-chan struct{} {
	c.k.expire()
	return c.Context.Done()
}

func (c *leaseContext) Err() error {
	c.k.expire()
	return c.Context.Err()
}

func (c *leaseContext) Value(key any) any {
	c.k.expire()
	return c.Context.Value(key)
}

// expire cancels fn's context as lost if the lease's deadline has passed,
// by this process's clock, and fn is still running on it. It runs on any
// goroutine that looks at the context, inside any library, so it leaves the
// telemetry to the keeper's goroutine (keepAlive records the loss as it
// ends).
func (k *keeper) expire() {
	h := k.h
	h.mu.Lock()
	deadline, released := h.deadline, h.released
	h.mu.Unlock()
	if released || time.Now().Before(deadline) || k.ctx.Err() != nil || k.stopped() {
		return
	}
	k.end(h.core.lost(h, "the lease could not be confirmed before its deadline"))
}

// stopped reports whether fn has returned.
func (k *keeper) stopped() bool {
	select {
	case <-k.stop:
		return true
	default:
		return false
	}
}

// keeper keeps a lease alive while fn runs.
type keeper struct {
	h        *Held
	ctx      context.Context // fn's, beneath its leaseContext
	cancel   context.CancelCauseFunc
	stop     chan struct{} // closed when fn has returned
	interval time.Duration
	next     func(time.Time) time.Duration // the ttl of a refresh at a time
	// loss is why this hold's own lease was lost, once it is; a LockLost
	// cause that ctx inherits (an outer hold's) is not this hold's loss.
	loss atomic.Pointer[error]
}

// end ends the hold as lost for err: fn's context is cancelled with it.
func (k *keeper) end(err error) {
	k.loss.CompareAndSwap(nil, &err)
	k.cancel(err)
}

// keepAlive refreshes the lease until stop closes, and cancels fn's context
// with a LockLost cause once the lease is gone, its deadline passes
// unconfirmed, or a refresh fails in a way no retry can mend (NOPERM, say). A
// refresh that fails for another reason (a network error) is retried until
// the deadline. A lease that fn released itself is no longer refreshed.
//
// The deadline is kept by this goroutine's own clock, not by the refresh's
// context: go-redis ignores context deadlines on socket reads unless the client
// sets ContextTimeoutEnabled, so a refresh whose reply never comes would
// otherwise hold the cancellation back until the client's ReadTimeout.
func (k *keeper) keepAlive() {
	h := k.h
	wait := k.interval
	var inflight chan refreshed // the refresh under way, if any
	defer func() {
		if inflight != nil {
			<-inflight // a refresh stuck on the network must end before Do returns
		}
		if k.loss.Load() != nil {
			h.recordEnd(k.ctx, true, telemetry.Unreachable) // a loss expire found
		}
	}()
	for !h.isReleased() && k.loss.Load() == nil {
		deadline := h.Deadline()
		if !time.Now().Before(deadline) {
			k.lose(telemetry.Unreachable, "the lease could not be confirmed before its deadline")
			return
		}
		// The caller's ctx ending does not stop the refreshes: fn may still
		// be winding down, and the lease must hold until it returns (stop).
		if !sleepFor(k.stop, min(wait, time.Until(deadline))) {
			return
		}
		if h.isReleased() || !time.Now().Before(deadline) {
			continue // the checks at the top end it
		}
		inflight = make(chan refreshed, 1)
		go k.refresh(deadline, inflight)
		expiry := time.NewTimer(time.Until(deadline))
		var r refreshed
		select {
		case r = <-inflight:
			inflight = nil
			expiry.Stop()
		case <-expiry.C:
			k.lose(telemetry.Unreachable, "a refresh got no reply before the lease deadline")
			return
		case <-k.stop:
			expiry.Stop()
			return
		}
		var done bool
		if wait, done = k.refreshed(r); done {
			return
		}
	}
}

// refreshed acts on the outcome of a refresh, and returns the wait until the
// next one, or done when the hold is lost.
func (k *keeper) refreshed(r refreshed) (wait time.Duration, done bool) {
	h := k.h
	switch {
	case r.err == nil && r.n == scripts.LeaseHeld:
		return k.interval, false
	case r.err == nil && !h.isReleased():
		k.lose(lostReason(r.n), h.core.why(r.n))
		return 0, true
	case r.err == nil:
		return k.interval, false // fn released it meanwhile
	}
	h.keys.kind.telemetry().RefreshFailed(k.ctx, h.keys.name, r.err)
	if !transient(r.err) && IsServerReply(r.err) {
		// NOPERM, WRONGTYPE, a script Redis refuses: no retry can confirm
		// the lease, and fn must stop now.
		h.recordEnd(k.ctx, true, telemetry.Unreachable)
		k.end(fmt.Errorf("%w: %s: a refresh failed, and cannot succeed: %w", h.core.cfg.Errors.LockLost, h.keys.label(), r.err))
		return 0, true
	}
	h.core.logger().Warn(h.core.cfg.Kind+": refresh failed; retrying until the lease deadline",
		"lock", h.keys.name, "owner", redact(h.value), "err", r.err)
	return max(k.interval/4, minTTL), false
}

// lose ends the hold as lost for reason: fn's context is cancelled with a
// LockLost cause that says why.
func (k *keeper) lose(reason telemetry.Reason, why string) {
	k.h.recordEnd(k.ctx, true, reason)
	k.end(k.h.core.lost(k.h, why))
}

// refreshed is the outcome of a refresh: refresh's reply and error.
type refreshed struct {
	n   scripts.LeaseState
	err error
}

// refresh refreshes the lease to next's ttl, bounded by deadline, and sends
// the outcome on done.
func (k *keeper) refresh(deadline time.Time, done chan<- refreshed) {
	rctx, cancel := context.WithDeadline(context.WithoutCancel(k.ctx), deadline)
	defer cancel()
	n, err := k.h.refresh(rctx, k.next(time.Now()))
	done <- refreshed{n, err}
}

// sleepFor waits d, and reports false if stop closes first.
func sleepFor(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

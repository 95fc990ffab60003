package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// releaseTimeout bounds the release at the end of Do and Once, which runs even
// when the caller's ctx has ended so that a lock is not left to expire.
const releaseTimeout = 5 * time.Second

// Do obtains the lock called name (waiting), runs fn while keeping the lease
// alive, and releases it. fn's context is cancelled with a cause matching
// Errors.LockLost as soon as the lease can no longer be confirmed before its
// deadline; Do's error then matches LockLost too.
func (c *Core) Do(ctx context.Context, name string, ttl time.Duration, fn func(context.Context, *Held) error) error {
	h, err := c.Obtain(ctx, name, ttl)
	if err != nil {
		return err
	}
	return h.Hold(ctx, fn)
}

// Hold runs fn while refreshing the lease every third of its ttl (the ttl of
// the grant or of the last Refresh), then releases it. fn's context is
// cancelled with a cause matching Errors.LockLost as soon as the lease can no
// longer be confirmed before its deadline; Hold's error then matches LockLost.
func (h *Held) Hold(ctx context.Context, fn func(context.Context, *Held) error) error {
	if !time.Now().Before(h.Deadline()) {
		return fmt.Errorf("%w: %s: the lease was released or is past its deadline", h.core.cfg.Errors.NotHeld, Quote(h.keys.lock))
	}
	ttl := h.TTLSet()
	fnErr, lost := h.run(ctx, ttl/3, func(time.Time) time.Duration { return ttl }, fn)
	if lost != nil {
		_ = h.releaseDetached(ctx)
		return errors.Join(lost, fnErr)
	}
	if err := h.releaseDetached(ctx); err != nil {
		if errors.Is(err, h.core.cfg.Errors.NotHeld) {
			err = h.core.lost(h, "the lease expired before release")
		}
		return errors.Join(fnErr, err)
	}
	return fnErr
}

// Once runs fn at most once per period across every Locker sharing the Redis:
// the first caller takes the lock for period and runs fn; the others return
// false. A grant whose reply came after its deadline was released, so nobody
// runs fn for it: that is an error, not a skip. The lock is not released when fn returns inside the period, so a late
// caller for the same tick skips; it is kept alive while fn runs past the
// period, and released as soon as such a long run ends.
func (c *Core) Once(ctx context.Context, name string, period time.Duration, fn func(context.Context, *Held) error) (bool, error) {
	h, err := c.Try(ctx, name, period)
	if errors.Is(err, c.cfg.Errors.NotObtained) && !errors.Is(err, errLate) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	start := time.Now()
	end := start.Add(period)
	// While fn runs, keep the key at least until the period ends, and at least
	// half a period ahead once it has ended.
	next := func(now time.Time) time.Duration { return max(end.Sub(now), period/2, MinTTL) }
	fnErr, lost := h.run(ctx, period/3, next, fn)
	// Even after a loss: a refresh that landed late may have kept the key,
	// and it must not outlive the period, or the next tick would skip.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if left := time.Until(end); left >= MinTTL {
		err = h.Refresh(ctx, left)
	} else {
		err = h.Release(ctx)
	}
	if lost != nil {
		return true, errors.Join(lost, fnErr)
	}
	if errors.Is(err, c.cfg.Errors.NotHeld) {
		err = c.lost(h, "the lease was gone when the run ended")
	}
	return true, errors.Join(fnErr, err)
}

func (h *Held) releaseDetached(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return h.Release(ctx)
}

func (c *Core) lost(h *Held, why string) error {
	return fmt.Errorf("%w: %s: %s", c.cfg.Errors.LockLost, Quote(h.keys.lock), why)
}

// run calls fn with a context that is cancelled when the lease is lost, while a
// goroutine refreshes the lease every interval to the ttl next returns. It
// returns fn's error and, if the lease was lost, why.
func (h *Held) run(ctx context.Context, interval time.Duration, next func(time.Time) time.Duration, fn func(context.Context, *Held) error) (fnErr, lost error) {
	fnCtx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.keepAlive(fnCtx, stop, interval, next, cancel)
	}()
	fnErr = fn(fnCtx, h)
	close(stop)
	<-stopped
	cause := context.Cause(fnCtx)
	cancel(nil)
	if errors.Is(cause, h.core.cfg.Errors.LockLost) {
		return fnErr, cause
	}
	return fnErr, nil
}

// keepAlive refreshes the lease until stop closes, and cancels with a LockLost
// cause once the lease is gone or its deadline passes unconfirmed. A refresh
// that fails for another reason (a network error) is retried until the deadline.
//
// The deadline is kept by this goroutine's own clock, not by the refresh's
// context: go-redis ignores context deadlines on socket reads unless the client
// sets ContextTimeoutEnabled, so a refresh whose reply never comes would
// otherwise hold the cancellation back until the client's ReadTimeout.
func (h *Held) keepAlive(ctx context.Context, stop <-chan struct{}, interval time.Duration, next func(time.Time) time.Duration, cancel context.CancelCauseFunc) {
	interval = max(interval, MinTTL)
	wait := interval
	var inflight chan error // the refresh under way, if any
	defer func() {
		if inflight != nil {
			<-inflight // a refresh stuck on the network must end before Do returns
		}
	}()
	for {
		deadline := h.Deadline()
		if !time.Now().Before(deadline) {
			cancel(h.core.lost(h, "the lease could not be confirmed before its deadline"))
			return
		}
		// The caller's ctx ending does not stop the refreshes: fn may still
		// be winding down, and the lease must hold until it returns (stop).
		t := time.NewTimer(min(wait, time.Until(deadline)))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			continue // the check at the top cancels
		}
		inflight = make(chan error, 1)
		go func(done chan<- error) {
			rctx, rcancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
			defer rcancel()
			done <- h.Refresh(rctx, next(time.Now()))
		}(inflight)
		expiry := time.NewTimer(time.Until(deadline))
		var err error
		select {
		case err = <-inflight:
			inflight = nil
			expiry.Stop()
		case <-expiry.C:
			cancel(h.core.lost(h, "a refresh got no reply before the lease deadline"))
			return
		case <-stop:
			expiry.Stop()
			return
		}
		switch {
		case err == nil:
			wait = interval
		case errors.Is(err, h.core.cfg.Errors.NotHeld):
			cancel(h.core.lost(h, "the key was deleted or taken by another owner"))
			return
		default:
			h.core.logger().Warn("leasekit: refresh failed; retrying until the lease deadline",
				"key", h.keys.lock, "owner", h.Owner(), "err", err)
			wait = max(interval/4, MinTTL)
		}
	}
}

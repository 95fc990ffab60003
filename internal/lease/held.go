package lease

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
)

// Held is a granted lease.
type Held struct {
	core  *Core
	keys  *keySet
	value string
	token uint64

	granted time.Time // no later than the grant, as its lease is measured

	mu       sync.Mutex
	deadline time.Time
	ttl      time.Duration // of the grant or the last Refresh
	released bool          // by a Release call that reached Redis
	ended    bool          // its end (release or loss) went to the telemetry
	// deleteSent says a plain delete of the grant (plain.go) of a Release
	// that failed may have reached Redis.
	deleteSent bool

	// handed is the queue entry a grant message handed this lease to; nil
	// for a grant a script replied with. Were the message forged, the
	// entry would still be queued: a release that finds the lease gone
	// takes it out (see release).
	handed *entry

	// leader is the key of the election this lease leads (see Lead), and
	// restore writes it back; "" for a lease that leads none.
	leader  string
	restore func(context.Context) error
}

// Lead makes the lease an election's leader's: every refresh keeps the
// election's leader key alive with it, and when the key no longer holds the
// grant (deleted, or evicted), calls restore to write it back. Call it
// before the lease is refreshed.
func (h *Held) Lead(leaderKey string, restore func(context.Context) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leader, h.restore = leaderKey, restore
}

// recordEnd records the end of the hold in the telemetry, once: a release,
// or a loss for reason.
func (h *Held) recordEnd(ctx context.Context, lost bool, reason telemetry.Reason) {
	h.mu.Lock()
	done := h.ended
	h.ended = true
	h.mu.Unlock()
	if !done {
		h.keys.kind.telemetry().HoldEnded(ctx, h.keys.name, h.granted, lost, reason)
	}
}

// lostReason is the telemetry's reason for a lease a refresh or release
// found lost, with reply n: gone, or taken by another owner (or broken by
// an operator, after which another owner may hold it).
func lostReason(n scripts.LeaseState) telemetry.Reason {
	if n == scripts.LeaseGone {
		return telemetry.KeyGone
	}
	return telemetry.AnotherOwner
}

// ttlSet is the ttl of the grant or of the last successful Refresh.
func (h *Held) ttlSet() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ttl
}

// Key is the lock's Redis key.
func (h *Held) Key() string { return h.keys.key }

// Token is the grant's fencing token (0 for efficiency locks).
func (h *Held) Token() uint64 { return h.token }

// Deadline is the conservative local expiry of the lease.
func (h *Held) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// over reports whether the lease has ended for its holder: released, found
// lost, or past its deadline.
func (h *Held) over() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released || h.ended || !time.Now().Before(h.deadline)
}

// isReleased reports whether a Release of this lease reached Redis.
func (h *Held) isReleased() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

// Refresh restarts the lease at ttl if it is still held.
func (h *Held) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(h.core.cfg.Errors.InvalidTTL, ttl); err != nil {
		return err
	}
	n, err := h.refresh(ctx, ttl)
	if err == nil && n != scripts.LeaseHeld {
		err = h.notHeld(n)
	}
	return err
}

// refresh runs the refresh script and, when it restarted the lease, moves
// the deadline. It returns what the script found of the lease: LeaseHeld
// when refreshed, LeaseGone or LeaseTaken.
func (h *Held) refresh(ctx context.Context, ttl time.Duration) (scripts.LeaseState, error) {
	sent := time.Now()
	h.mu.Lock()
	leader, restore := h.leader, h.restore
	h.mu.Unlock()
	r, err := h.keys.kind.refresh(ctx, h, ttl, leader)
	var got scripts.Refreshed
	if err == nil {
		got, err = scripts.ReadRefresh(r)
	}
	if err != nil {
		return 0, h.core.redisErr(ctx, "refresh", h.keys, err)
	}
	n := got.Lease
	if got.LeaderLost {
		if err := restore(ctx); err != nil {
			h.core.logger().Warn(h.core.cfg.Kind+": a leader could not write back its leader key; observers see no leader until it can",
				"lock", h.keys.name, "err", err)
		}
	}
	if n == scripts.LeaseHeld {
		h.mu.Lock()
		h.deadline, h.ttl = sent.Add(ttl-h.core.drift(ttl)), ttl
		h.mu.Unlock()
	}
	return n, nil
}

// Release ends the lease if it is still held: the lock goes to the first live
// waiter queued for it, or is deleted (and, from a Core whose waiters do not
// queue, a wake-up is published for such waiters).
//
// A Release whose reply was lost, sent again by go-redis or by the caller,
// reports what the first send did (release.lua's mark); one after a Release
// that returned is NotHeld, without a round trip.
func (h *Held) Release(ctx context.Context) error {
	if h.isReleased() {
		return fmt.Errorf("%w: %s: it was released already", h.core.cfg.Errors.NotHeld, h.keys.label())
	}
	ctx, span := h.keys.kind.telemetry().Start(ctx, "Release", h.keys.name)
	n, err := h.release(ctx)
	if err == nil && n != scripts.LeaseHeld {
		err = h.notHeld(n)
	}
	telemetry.End(span, err)
	return err
}

// release runs the release script for the lease and, once it reached Redis,
// marks the lease released. It returns LeaseHeld when the lease was
// released (by this call, or by an earlier send of it whose reply was lost:
// the script's mark says so), else LeaseGone, LeaseTaken or LeaseBroken.
func (h *Held) release(ctx context.Context) (scripts.LeaseState, error) {
	ended, err := h.end(ctx)
	if err != nil {
		return 0, h.core.redisErr(ctx, "release", h.keys, err)
	}
	h.mu.Lock()
	h.deadline, h.released = time.Time{}, true
	h.mu.Unlock()
	if ended.Unheld() {
		h.recordEnd(ctx, true, lostReason(ended.Lease))
		if h.handed != nil {
			// The grant message may have been forged: take the entry out,
			// lest a later release hand the lock to it, and end the real
			// grant to it, if one came (its message lost or not read yet),
			// lest the lock wait out that grant's ttl.
			_, _ = h.core.runRelease(ctx, h.keys, scripts.AnyGrant(h.value), h.handed)
		}
		return ended.Lease, nil
	}
	if ended.Handed {
		h.keys.kind.telemetry().Handoff(ctx, h.keys.name)
	}
	h.recordEnd(ctx, false, 0)
	return scripts.LeaseHeld, nil
}

// end ends the grant: with the plain delete where the server has one and
// the lock holds the bare grant (plain.go), else with release.lua, leaving
// its mark. After a delete that may have reached Redis more than once (in
// this call, or in an earlier one that failed), sent before the lease's
// deadline, a grant found gone or another owner's was most likely deleted
// by it: it is reported released.
func (h *Held) end(ctx context.Context) (scripts.Ended, error) {
	h.mu.Lock()
	resent := h.deleteSent
	// A lease past its deadline may have lapsed before the delete: found
	// gone, it is reported so, resent or not.
	live := time.Now().Before(h.deadline)
	h.mu.Unlock()
	if h.plainLock() {
		done, again, err := h.core.plainDelete(ctx, h.keys, h.value)
		again = again && live
		resent = resent || again
		if err != nil {
			h.mu.Lock()
			h.deleteSent = h.deleteSent || again
			h.mu.Unlock()
			return scripts.Ended{}, err
		}
		if done {
			return plainEnded, nil
		}
	}
	ended, err := h.core.endGrant(ctx, h.keys, h.value, nil)
	if err == nil && resent && ended.Unheld() && ended.Lease != scripts.LeaseBroken {
		return plainEnded, nil
	}
	return ended, err
}

// notHeld is the error for a lease Redis no longer holds for this owner,
// as the reply n of a refresh or release says (why).
func (h *Held) notHeld(n scripts.LeaseState) error {
	return fmt.Errorf("%w: %s: %s", h.core.cfg.Errors.NotHeld, h.keys.label(), h.core.why(n))
}

// why says what the reply n of a refresh or release saw of a lease Redis no
// longer holds: the key gone, another owner's, or broken by an operator.
func (c *Core) why(n scripts.LeaseState) string {
	switch n {
	case scripts.LeaseGone:
		return "the key is gone (the lease expired, the key was deleted, or an operator broke the lease)"
	case scripts.LeaseBroken:
		return "an operator broke it (Break)"
	}
	return "another owner holds it (the lease expired, or an operator broke it, and another took it)"
}

// TTL asks Redis how long the lease has left.
func (h *Held) TTL(ctx context.Context) (time.Duration, error) {
	r, err := h.keys.kind.pttl(ctx, h)
	var ms int64
	var n scripts.LeaseState
	if err == nil {
		ms, n, err = scripts.ReadTTL(r)
	}
	switch {
	case err != nil:
		return 0, h.core.redisErr(ctx, "ttl of", h.keys, err)
	case n != scripts.LeaseHeld:
		return 0, h.notHeld(n)
	case ms < 0:
		return -1, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// runRelease runs the release script for value on the lock, after taking
// the queue entry leaving (a waiter giving up) out of the lock's queue, if it
// is not nil. A value ending in ':' matches any grant that starts with it (an
// owner whose token is unknown). It returns what the script did. It leaves
// no mark (release.lua): what it releases (a grant its waiter cannot use, or
// gave up) was never a Held, whose Release a resend would report.
//
// While the lock's slot migrates between two Redis Cluster masters, the
// release waits for it as every script does (Script.Run).
func (c *Core) runRelease(ctx context.Context, lk *keySet, value string, leaving *entry) (scripts.Ended, error) {
	match := matchExact
	if strings.HasSuffix(value, ":") {
		match = matchPrefix
	}
	args := []any{value, match, notQueued, c.listen.channels}
	if leaving != nil {
		// The entry may be queued at its current generation, or, after a
		// lost reply, at the next one.
		args = []any{value, match, leaving.text(leaving.gen), c.listen.channels, leaving.text(leaving.gen + 1)}
	}
	return c.releaseWith(ctx, lk, lk.keys, args)
}

// endGrant ends the grant stored as value on the lock or semaphore at lk,
// exactly, and leaves the mark of what it did (EndedKey), so that a resend
// of the call after a lost reply reports what the first send did, and ends
// nothing else: a holder's release, or with brk an operator's break, with
// leader, an election's leader key, or "".
func (c *Core) endGrant(ctx context.Context, lk *keySet, value string, brk *breakCall) (scripts.Ended, error) {
	keys := make([]any, 0, len(lk.keys)+3)
	keys = append(append(keys, lk.keys...), scripts.EndedKey(lk.key, value))
	match := matchExact
	if brk != nil {
		match = matchAny
		keys = append(keys, scripts.EndedKey(lk.key, "break "+brk.nonce))
		if brk.leader != "" {
			keys = append(keys, brk.leader)
		}
	}
	return c.releaseWith(ctx, lk, keys, []any{value, match, notQueued, c.listen.channels, notQueued, c.markLife})
}

// breakCall is one call of Break: its nonce, which names the mark of the
// call, so that its resends tell it from another Break of a grant of the
// same value (release.lua), and an election's leader key, or "".
type breakCall struct {
	nonce, leader string
}

// serveOnFor bounds how long a releaser goes on serving the queue past dead
// entries; past it, the waiters' own attempts go on (each at most a second
// later).
const serveOnFor = 2 * time.Second

// releaseWith runs the release script of lk on keys with args, as
// runRelease describes. When its reply says it stopped short at dead
// entries (their process was killed), it goes on serving the queue, one
// short call after another, so that Redis serves other clients in between;
// and returns the release's reply as if it had not stopped. A lapsed
// lease's release that handed the lock on found the caller's lease gone:
// so it says.
func (c *Core) releaseWith(ctx context.Context, lk *keySet, keys, args []any) (scripts.Ended, error) {
	reply, err := c.run(ctx, lk.kind.releaseScript(), keys, args...)
	var ended scripts.Ended
	if err == nil {
		ended, err = scripts.ReadEnd(reply)
	}
	if err != nil || !ended.ServeOn {
		return ended, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serveOnFor)
	defer cancel()
	for more := true; more && ctx.Err() == nil; {
		r, err := c.run(ctx, lk.kind.releaseScript(), lk.keys, vacant, matchExact, notQueued, c.listen.channels)
		var next scripts.Ended
		if err == nil {
			next, err = scripts.ReadEnd(r)
		}
		more = err == nil && next.ServeOn
	}
	ended.ServeOn = false
	return ended, nil
}

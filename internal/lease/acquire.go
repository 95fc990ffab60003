package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Attempt is what one acquire round trip found.
type Attempt struct {
	// Granted is true when the lock is the caller's.
	Granted bool
	// Value is what the grant stored in the lock key, when Granted (without
	// the mark of queued waiters: see handoff.go).
	Value string
	// Token is the grant's fencing token (fenced kinds only).
	Token uint64
	// Left, when positive, is the key's remaining ttl as Redis reported it
	// for a grant it had made to the caller before this attempt (a client
	// retry), whose expiry the attempt did not restart; the lease is no
	// longer than that.
	Left time.Duration
	// HolderTTL is the holder's remaining ttl when not Granted; negative when
	// the holder's key has no expiry.
	HolderTTL time.Duration
	// Place is the waiter's place in the lock's queue (server microseconds)
	// when this attempt queued it; 0 when it did not.
	Place int64
}

// Mode says what an acquire attempt must find out beyond "granted".
type Mode int

const (
	// Try is a lone attempt: when not granted, it must be sure the lock is
	// not the caller's own from a retried call.
	Try Mode = iota
	// Probe is the first attempt of a wait: the cheapest, answering only
	// "granted" or "maybe not"; the Wait attempt that follows settles it.
	Probe
	// Wait is an attempt of a waiter that has subscribed to what tells it of
	// a release (the wait script): it queues the waiter, or marks the lock
	// for a wake-up, and brings the holder's ttl.
	Wait
)

// maxLateGrants is how many grants in a row may come back past their lease
// deadline before Obtain gives up: a ttl shorter than the round trip would
// otherwise have it grant and release in a loop until ctx ends.
const maxLateGrants = 3

// Try makes one attempt to acquire the lock called name.
func (c *Core) Try(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	ctx, t := c.cfg.Telemetry.StartAcquire(ctx, c.cfg.TryOp, name)
	h, err := c.try(ctx, name, ttl)
	t.End(c.outcome(err), err)
	return h, err
}

func (c *Core) try(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	lk, owner, err := c.begin(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	h, _, err := c.attempt(ctx, lk, owner, ttl, Try, "", 0)
	switch {
	case err != nil && errors.Is(err, c.cfg.Errors.Late):
		return nil, err // released already
	case err != nil:
		return nil, c.failed(ctx, lk, owner, ttl, err)
	case h == nil:
		return nil, fmt.Errorf("%w: lock %s is held by another owner", c.cfg.Errors.NotObtained, Quote(name))
	}
	return h, nil
}

// attempt runs one acquire and, when granted, returns the lease. A Wait
// attempt runs the wait script, which queues a waiter with an entry when the
// lock is held; place is the entry's place when an earlier attempt queued
// it, else 0.
// A grant whose reply came after its lease deadline is released, and is an
// error matching Errors.Late.
//
// After an error the caller decides whether to undo a grant the attempt may
// have made (see mayHaveGranted and abandon): a waiter that tries again
// recognises its own grant instead.
func (c *Core) attempt(ctx context.Context, lk *Keys, owner string, ttl time.Duration, mode Mode, entry string, place int64) (*Held, Attempt, error) {
	sent := time.Now()
	var a Attempt
	var err error
	switch {
	case mode == Wait:
		a, err = c.wait(ctx, lk, owner, ttl, entry, place)
	case c.cfg.Fenced:
		a, err = c.acquireFenced(ctx, lk, owner, ttl)
	default:
		a, err = c.acquirePlain(ctx, lk, owner, ttl, mode)
	}
	if err != nil {
		return nil, a, c.acquireErr(lk, err)
	}
	if !a.Granted {
		return nil, a, nil
	}
	h, err := c.held(ctx, lk, owner, a, sent, ttl)
	return h, a, err
}

// held makes the lease of grant a, measured from start: a time no later than
// the grant. A grant whose deadline has passed already is released.
func (c *Core) held(ctx context.Context, lk *Keys, owner string, a Attempt, start time.Time, ttl time.Duration) (*Held, error) {
	length := ttl
	if a.Left > 0 && a.Left < ttl {
		length = a.Left
	}
	deadline := start.Add(length - c.Drift(length))
	if late := time.Since(deadline); late >= 0 {
		c.abandon(ctx, lk, owner, ttl, "")
		return nil, fmt.Errorf("%w: lock %s: the grant's reply came %v after its lease deadline (ttl %v): "+
			"the ttl is too short for the round trip to Redis; released it", c.cfg.Errors.Late, Quote(lk.name), late.Round(time.Millisecond), ttl)
	}
	return &Held{core: c, keys: lk, value: a.Value, token: a.Token, granted: start, deadline: deadline, ttl: ttl}, nil
}

// acquirePlain runs an efficiency acquire, SET NX PX: one round trip when the
// lock is free. A failed Try reads the holder and its ttl in a second round
// trip, to recognise its own grant after a client retry (a grant recognised
// so was made by an earlier send, or, with a shared owner source, by another
// Locker, so its lease is no longer than the key's remaining ttl); a failed
// Probe leaves that to the Wait attempt that follows.
func (c *Core) acquirePlain(ctx context.Context, lk *Keys, owner string, ttl time.Duration, mode Mode) (Attempt, error) {
	client := c.cfg.Client
	ok, err := client.SetNX(ctx, lk.lock, owner, ttl).Result()
	if err != nil || ok || mode == Probe {
		return Attempt{Granted: ok, Value: owner, HolderTTL: -1}, err
	}
	pipe := client.Pipeline()
	holder := pipe.Get(ctx, lk.lock)
	pttl := pipe.PTTL(ctx, lk.lock)
	_, _ = pipe.Exec(ctx) // each command's error is read below
	return readHolder(holder, pttl, owner)
}

// readHolder reads a failed SET NX's follow-up: the lock's holder and
// remaining ttl.
func readHolder(holder *redis.StringCmd, pttl *redis.DurationCmd, owner string) (Attempt, error) {
	v, err := holder.Result()
	switch {
	case err == redis.Nil:
		return Attempt{HolderTTL: 0}, nil // released in between: try again now
	case err != nil:
		return Attempt{}, err
	}
	left, err := pttl.Result()
	switch {
	case err != nil:
		return Attempt{}, err
	case Mine(v, owner) && left > 0:
		return Attempt{Granted: true, Value: owner, Left: left}, nil
	case Mine(v, owner):
		return Attempt{Granted: true, Value: owner}, nil // no expiry
	case left == -2:
		return Attempt{HolderTTL: 0}, nil // expired within the pipeline
	case left < 0:
		return Attempt{HolderTTL: -1}, nil
	}
	return Attempt{HolderTTL: left}, nil
}

// acquireFenced runs the fenced acquire script: its reply is the grant's
// token, or the holder's ttl in ms.
func (c *Core) acquireFenced(ctx context.Context, lk *Keys, owner string, ttl time.Duration) (Attempt, error) {
	return c.runGrant(ctx, fencedAcquireScript, lk, owner, owner, Millis(ttl), c.kind)
}

// runGrant runs s, the fenced acquire script or the wait script, which may
// grant owner the lock, and reads its reply. With Replicas, WAIT follows in
// the same round trip, and a grant fewer replicas confirm is an error
// matching NotReplicated (the caller releases it, as after any error).
func (c *Core) runGrant(ctx context.Context, s Script, lk *Keys, owner string, args ...any) (Attempt, error) {
	var reply any
	var confirmed int64
	var err error
	if c.cfg.Replicas == 0 {
		reply, err = c.Run(ctx, s, lk, 3, args...).Result()
	} else {
		reply, confirmed, err = c.runConfirmed(ctx, s, lk, 3, args...)
	}
	if err != nil {
		return Attempt{}, err
	}
	var a Attempt
	if s == waitScript {
		a, err = c.readWait(lk, owner, reply)
	} else {
		a, err = c.readFenced(lk, owner, reply)
	}
	if err != nil || !a.Granted || c.cfg.Replicas == 0 || confirmed >= int64(c.cfg.Replicas) {
		return a, err
	}
	return Attempt{}, Named(fmt.Errorf("%w: lock %s: %d of %d replicas confirmed within %v",
		c.cfg.Errors.NotReplicated, Quote(lk.name), confirmed, c.cfg.Replicas, c.cfg.ReplicaWait))
}

// readFenced reads the fenced acquire script's reply: a token string when
// granted, the holder's ttl in ms otherwise.
func (c *Core) readFenced(lk *Keys, owner string, reply any) (Attempt, error) {
	switch v := reply.(type) {
	case string:
		return c.Grant(lk, owner, owner+":"+v)
	case int64:
		return Attempt{HolderTTL: time.Duration(v) * time.Millisecond}, nil
	}
	return Attempt{}, fmt.Errorf("unexpected reply %T", reply)
}

// wait runs one attempt of a waiter (scripts/wait.lua). One with a queue
// entry queues when the lock is held; an earlier attempt queued it at place,
// if not 0, and the script then keeps it there, or puts it back there if the
// queue lost it. One without (entry "") only marks the lock, so that the
// release that deletes it publishes a wake-up.
func (c *Core) wait(ctx context.Context, lk *Keys, owner string, ttl time.Duration, entry string, place int64) (Attempt, error) {
	at := notQueued
	if place != 0 {
		at = strconv.FormatInt(place, 10)
	}
	return c.runGrant(ctx, waitScript, lk, owner, owner, Millis(ttl), entry, c.kind, at)
}

// readWait reads the wait script's reply.
func (c *Core) readWait(lk *Keys, owner string, r any) (Attempt, error) {
	reply, _ := r.([]any)
	if len(reply) == 2 && (reply[0] == int64(1) || reply[0] == int64(2)) {
		if value, ok := reply[1].(string); ok {
			return c.Grant(lk, owner, value)
		}
	}
	if len(reply) == 3 && reply[0] == int64(0) {
		left, ok1 := reply[1].(int64)
		place, ok2 := reply[2].(string)
		if ok1 && ok2 {
			a := Attempt{HolderTTL: time.Duration(left) * time.Millisecond}
			var err error
			if place != "" {
				a.Place, err = strconv.ParseInt(place, 10, 64)
			}
			if err == nil {
				return a, nil
			}
		}
	}
	// %T, not %v: a grant reply holds the owner id.
	return Attempt{}, fmt.Errorf("unexpected reply %T of %d elements", r, len(reply))
}

// notQueued is the wait script's ARGV[5] for a waiter that no attempt has
// queued yet, boxed once.
var notQueued any = ""

// Grant reads a grant to owner whose stored value is value: for a fenced kind,
// "owner:token" with a positive 64-bit token.
func (c *Core) Grant(lk *Keys, owner, value string) (Attempt, error) {
	if !c.cfg.Fenced {
		if value != owner {
			return Attempt{}, errors.New("the grant holds another owner's id")
		}
		return Attempt{Granted: true, Value: value}, nil
	}
	digits, ok := strings.CutPrefix(value, owner+":")
	if !ok {
		return Attempt{}, Named(fmt.Errorf("%w: lock %s: the grant carries no token", c.cfg.Errors.InvalidToken, Quote(lk.name)))
	}
	token, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || token == 0 {
		return Attempt{}, Named(fmt.Errorf("%w: lock %s: the grant holds token %q, not a positive 64-bit integer (key %s)",
			c.cfg.Errors.InvalidToken, Quote(lk.name), digits, Quote(lk.lock)))
	}
	return Attempt{Granted: true, Value: value, Token: token}, nil
}

// abandon releases the caller's grant, if Redis made one, after its reply was
// lost or came too late, and takes the caller's queue entry leaving (if not
// "") out of the lock's queue. Best effort: if Redis cannot be reached now
// either, the grant expires with its ttl.
func (c *Core) abandon(ctx context.Context, lk *Keys, owner string, ttl time.Duration, leaving string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(ttl, time.Second))
	defer cancel()
	value, prefix := owner, false
	if c.cfg.Fenced {
		// The token of a grant whose reply was lost is unknown.
		value, prefix = owner+":", true
	}
	if _, err := c.release(ctx, lk, value, prefix, leaving); err != nil && !IsServerReply(err) {
		c.logger().Warn(c.cfg.Kind+": could not release a grant it cannot use (its reply was lost or late, or its waiter gave up); it expires with its ttl",
			"lock", lk.name, "owner", Redact(owner), "ttl", ttl, "err", err)
	}
}

// failed ends an acquire whose attempt failed with err: it releases whatever
// Redis may have granted it, and returns err, which, when ctx has ended,
// also matches NotObtained and ctx.Err().
func (c *Core) failed(ctx context.Context, lk *Keys, owner string, ttl time.Duration, err error) error {
	if mayHaveGranted(err) {
		c.abandon(ctx, lk, owner, ttl, "")
	}
	name := lk.name
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return c.notObtained(name, ctx.Err(), err)
	}
	if ctx.Err() != nil && !errors.Is(err, c.cfg.Errors.NotObtained) {
		return c.notObtained(name, err)
	}
	return err
}

// notObtained is an acquire's error for the lock called name when it ends for
// causes (the context's end, a failure meanwhile): it matches NotObtained and
// each cause.
func (c *Core) notObtained(name string, causes ...error) error {
	return fmt.Errorf("%w: lock %s: %w", c.cfg.Errors.NotObtained, Quote(name), errors.Join(causes...))
}

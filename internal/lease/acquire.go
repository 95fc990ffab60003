package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/scripts"
)

// acquire is one call's acquire of one lock: what its attempts, its wait and
// its undoing share. Built once per call by Core.begin.
type acquire struct {
	c     *Core
	ctx   context.Context
	keys  *keySet
	owner string
	ttl   time.Duration
}

// found is what one acquire round trip found.
type found struct {
	// granted is true when the lock is the caller's; value is what the
	// grant stored (without the mark), token its fencing token.
	granted bool
	value   string
	token   uint64
	// left, when positive, is the key's remaining ttl as Redis reported it
	// for a grant made before this attempt (a client retry) whose expiry
	// the attempt did not restart; the lease is no longer than that.
	left time.Duration
	// holderTTL is the holder's remaining ttl when not granted; negative
	// when its key has no expiry.
	holderTTL time.Duration
	// queued, place and server are a waiting attempt's: it queued the
	// entry it was given (else the previous one is still queued, or the
	// waiter does not queue), the entry's place, and the server clock in
	// µs when the attempt ran.
	queued bool
	place  string
	server int64
	// settle says the lock (or a permit) is free, but the queue must be
	// served first: the lease lapsed with waiters queued, or the script
	// stopped short at dead entries ahead of the first live waiter. The
	// wait script settles it, at once (scripts/wire.go).
	settle bool
}

// maxSettle bounds the attempts a lone acquire makes to settle a lock whose
// queue must be served first: each looks at a hundred queue entries at most.
const maxSettle = 2000

// maxLateGrants is how many grants in a row may come back past their lease
// deadline before a wait gives up: a ttl shorter than the round trip would
// otherwise grant and release in a loop until ctx ends.
const maxLateGrants = 3

// begin checks what every acquire of the lock or semaphore at lk must check
// before it touches Redis, and draws the caller's owner id. (A value: an
// uncontended acquire allocates nothing for it.)
func (c *Core) begin(ctx context.Context, lk *keySet, ttl time.Duration) (acquire, error) {
	if c.closed.Load() {
		return acquire{}, c.closedErr(lk)
	}
	if err := CheckName(c.cfg.Errors.InvalidKey, lk.name); err != nil {
		return acquire{}, err
	}
	if err := lk.kind.invalid(); err != nil {
		return acquire{}, err
	}
	if err := checkTTL(c.cfg.Errors.InvalidTTL, ttl); err != nil {
		return acquire{}, err
	}
	if err := ctx.Err(); err != nil {
		return acquire{}, c.notObtained(lk, err)
	}
	owner, err := newOwner(c.cfg.Kind, c.cfg.Owners)
	if err != nil {
		return acquire{}, err
	}
	return acquire{c: c, ctx: ctx, keys: lk, owner: owner, ttl: ttl}, nil
}

// Try makes one attempt to acquire the lock called name.
func (c *Core) Try(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	return c.try(ctx, c.lockKeys(name), ttl)
}

// try makes one attempt to acquire the lock or a permit of the semaphore at
// lk.
func (c *Core) try(ctx context.Context, lk *keySet, ttl time.Duration) (*Held, error) {
	op, _ := lk.kind.spans()
	ctx, t := lk.kind.telemetry().StartAcquire(ctx, op, lk.name)
	a, err := c.begin(ctx, lk, ttl)
	var h *Held
	if err == nil {
		h, err = a.try()
	}
	t.End(c.outcome(err), err)
	return h, err
}

func (a *acquire) try() (*Held, error) {
	h, _, err := a.once(false)
	switch {
	case err != nil && errors.Is(err, a.c.cfg.Errors.Late):
		return nil, err // released already
	case err != nil:
		return nil, a.failed(err)
	case h == nil:
		taken := a.c.cfg.Errors.Taken
		if taken == nil {
			taken = a.c.cfg.Errors.NotObtained
		}
		return nil, fmt.Errorf("%w: %s", taken, a.keys.kind.busy(a.keys))
	}
	return h, nil
}

// once makes one attempt without the wait script, and returns the lease when
// it was granted. A probe (the first attempt of a wait) answers only
// "granted" or "maybe not": the wait that follows settles it; a lone attempt
// must be sure the lock is not the caller's own from a retried call. A grant
// whose reply came after its lease deadline is released, and is an error
// matching Errors.Late. After another error the caller decides whether to
// undo a grant the attempt may have made (mayHaveGranted).
func (a *acquire) once(probe bool) (*Held, found, error) {
	sent := time.Now()
	f, err := a.keys.kind.attempt(*a, probe)
	// A probe leaves settling to the wait that follows; a lone attempt
	// serves the queue first, and takes what is left.
	for i := 0; err == nil && f.settle && !probe && i < maxSettle; i++ {
		sent = time.Now()
		f, err = a.keys.kind.settle(*a)
	}
	if err != nil {
		return nil, f, a.c.acquireErr(a.ctx, a.keys, err)
	}
	if !f.granted {
		return nil, f, nil
	}
	h, err := a.lease(f, sent)
	return h, f, err
}

// lease makes the lease of grant f, measured from start: a time no later than
// the grant. A grant whose deadline has passed already is released (that
// grant alone: its exact value) and is an error matching Errors.Late. A
// lock of a Core with Tokens draws its token first (tokens.go).
func (a *acquire) lease(f found, start time.Time) (*Held, error) {
	length := a.ttl
	if f.left > 0 && f.left < a.ttl {
		length = f.left
	}
	deadline := start.Add(length - a.c.drift(length))
	if late := time.Since(deadline); late >= 0 {
		a.logUnreleased(a.release(f.value))
		return nil, fmt.Errorf("%w: %s: the grant's reply came %v after its lease deadline (ttl %v): "+
			"the ttl is too short for the round trip to Redis; released it", a.c.cfg.Errors.Late, a.keys.label(), late.Round(time.Microsecond), a.ttl)
	}
	if l, ok := a.keys.kind.(*lock); ok && a.c.cfg.Tokens != nil {
		return a.stamped(l, f, start, deadline)
	}
	return &Held{core: a.c, keys: a.keys, value: f.value, token: f.token, granted: start, deadline: deadline, ttl: a.ttl}, nil
}

// setNX is an efficiency lock's lone attempt, SET NX PX: one round trip
// when the lock is free. A failed lone attempt reads the holder and its ttl
// in a second round trip, to recognise its own grant after a client retry
// (whose lease is then no longer than the key's remaining ttl); a failed
// probe leaves that to the wait that follows.
func setNX(a acquire, probe bool) (found, error) {
	conn := a.c.cfg.Conn
	_, err := conn.Do(a.ctx, "SET", a.keys.keyArg, a.owner, "PX", a.c.pxArg(a.ttl), "NX")
	ok := err == nil
	if errors.Is(err, port.Nil) {
		err = nil
	}
	if err != nil || ok || probe {
		return found{granted: ok, value: a.owner, holderTTL: -1}, err
	}
	replies := conn.Pipe(a.ctx, a.keys.key, []any{"GET", a.keys.key}, []any{"PTTL", a.keys.key})
	return a.readHolder(replies[0], replies[1])
}

// readHolder reads a failed SET NX's follow-up: the lock's holder and
// remaining ttl.
func (a *acquire) readHolder(holder, pttl port.Reply) (found, error) {
	v, _ := holder.Val.(string)
	err := holder.Err
	switch {
	case errors.Is(err, port.Nil):
		return found{}, nil // released in between: try again now
	case err != nil:
		return found{}, err
	}
	ms, err := port.Int64(pttl.Val, pttl.Err)
	if err != nil {
		return found{}, err
	}
	left := time.Duration(ms) // -1 and -2 as PTTL says them
	if ms >= 0 {
		left = time.Duration(ms) * time.Millisecond
	}
	p, _ := scripts.ParseValue(v, false)
	if left == -2 {
		return found{}, nil // expired within the pipeline
	}
	left = p.LeaseLeft(left)
	switch {
	case left == 0:
		return found{settle: true}, nil // lapsed, with waiters queued
	case p.Owner == a.owner:
		return found{granted: true, value: a.owner, left: max(left, 0)}, nil // -1: no expiry
	case left < 0:
		return found{holderTTL: -1}, nil
	}
	return found{holderTTL: left}, nil
}

// acquireFenced is a fenced lock's lone attempt (a probe too), the fenced
// acquire script, for locks of kind.
func acquireFenced(a acquire, kind any) (found, error) {
	return a.runGrant(fencedAcquireScript, a.readFenced, a.owner, Millis(a.ttl), kind)
}

// readFenced reads the fenced acquire script's reply.
func (a *acquire) readFenced(reply any) (found, error) {
	at, err := scripts.ReadAttempt(reply)
	if err != nil {
		return found{}, err
	}
	return a.attempted(at)
}

// attempted is what an attempt whose reply was read as at found.
func (a *acquire) attempted(at scripts.Attempt) (found, error) {
	if at.Granted() {
		return a.granted(at.Value)
	}
	f := found{holderTTL: time.Duration(at.HolderTTL) * time.Millisecond, queued: at.Code == scripts.AttemptQueued,
		place: at.Place, server: at.Now, settle: at.Code == scripts.AttemptSettle}
	return f, nil
}

// granted reads a grant to the caller whose stored value is v.
func (a *acquire) granted(v string) (found, error) {
	p, err := scripts.ParseValue(v, a.c.cfg.Fenced)
	switch {
	case err != nil:
		return found{}, namesLock(fmt.Errorf("%w: %s: the grant holds %w (key %s)",
			a.c.cfg.Errors.InvalidToken, a.keys.label(), err, Quote(a.keys.key)))
	case p.Owner != a.owner:
		return found{}, errors.New("the grant holds another owner's id")
	}
	return found{granted: true, value: v, token: p.Token}, nil
}

// runGrant runs s, a script that may grant the lock, on the lock's keys with
// args, and reads its reply with read. With Replicas, WAIT follows in the
// same round trip, and a grant fewer replicas confirm is an error matching
// NotReplicated (the caller releases it, as after any error).
func (a *acquire) runGrant(s Script, read func(any) (found, error), args ...any) (found, error) {
	c := a.c
	var reply any
	var confirmed int64
	var err error
	if c.cfg.Replicas == 0 {
		reply, err = c.run(a.ctx, s, a.keys.keys, args...)
	} else {
		reply, confirmed, err = c.runConfirmed(a.ctx, s, a.keys.keys, args...)
	}
	if err != nil {
		return found{}, err
	}
	f, err := read(reply)
	if err != nil || !f.granted || c.cfg.Replicas == 0 || confirmed >= int64(c.cfg.Replicas) {
		return f, err
	}
	return found{}, namesLock(fmt.Errorf("%w: %s: %d of %d replicas confirmed within %v",
		c.cfg.Errors.NotReplicated, a.keys.label(), confirmed, c.cfg.Replicas, c.cfg.ReplicaWait))
}

// release ends the caller's grant stored as value, if Redis holds it: one
// whose reply was lost or came too late, or that its waiter cannot use.
// Best effort: if Redis cannot be reached now either, the grant expires
// with its ttl, and the error says so; the caller logs it (logUnreleased)
// or tries again later (strays.go).
func (a *acquire) release(value string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), min(a.ttl, time.Second))
	defer cancel()
	if _, err := a.c.runRelease(ctx, a.keys, value, nil); err != nil && !IsServerReply(err) {
		return err
	}
	return nil
}

// releaseAny ends any grant of the caller's that Redis holds, whose token
// (if any) it does not know: after a failure that may have granted it, or
// a wait given up. It takes the queue entry leaving (if not nil) out of the
// queue in the same step. Best effort, as release.
func (a *acquire) releaseAny(leaving *entry) error {
	value := a.owner
	if a.c.cfg.Fenced {
		value += ":" // any "owner:token" (release.lua)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), min(a.ttl, time.Second))
	defer cancel()
	if _, err := a.c.runRelease(ctx, a.keys, value, leaving); err != nil && !IsServerReply(err) {
		return err
	}
	return nil
}

// logUnreleased logs err, if not nil: a release of a grant the caller
// cannot use failed, and the grant expires with its ttl.
func (a *acquire) logUnreleased(err error) {
	if err != nil {
		a.c.logger().Warn(a.c.cfg.Kind+": could not release a grant it cannot use (its reply was lost or late, or its waiter gave up)",
			"lock", a.keys.name, "owner", redact(a.owner), "ttl", a.ttl, "err", err)
	}
}

// failed ends an acquire whose attempt failed with err: it releases whatever
// Redis may have granted it, and returns err, which, when ctx has ended,
// also matches NotObtained and ctx.Err().
func (a *acquire) failed(err error) error {
	if mayHaveGranted(err) {
		a.logUnreleased(a.releaseAny(nil))
	}
	ctx := a.ctx
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return a.c.notObtained(a.keys, ctx.Err(), err)
	}
	if ctx.Err() != nil && !errors.Is(err, a.c.cfg.Errors.NotObtained) {
		return a.c.notObtained(a.keys, err)
	}
	return err
}

// notObtained is an acquire's error for the lock or semaphore at lk when it
// ends for causes (the context's end, a failure meanwhile): it matches
// NotObtained and each cause.
func (c *Core) notObtained(lk *keySet, causes ...error) error {
	return fmt.Errorf("%w: %s: %w", c.cfg.Errors.NotObtained, lk.label(), join(causes...))
}

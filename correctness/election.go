package correctness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
)

// The election's keys and messages are specified in
// internal/lease/election.go, beside the leader key's name; this file runs
// the scripts that read and write them (scripts/election_*.lua).

// Leader is an election's leader: the value it campaigned with, and its term
// (the fencing token of its grant).
type Leader struct {
	Value []byte
	Term  uint64
}

// ErrNoLeader: the election has no leader now.
var ErrNoLeader = errors.New("correctness: no leader")

// MaxLeaderValue is the largest value a candidate can campaign with: 64 KiB.
const MaxLeaderValue = 64 << 10

var (
	announceScript = lease.NewScript(scripts.ElectionAnnounce)
	leaderScript   = lease.NewScript(scripts.ElectionLeader)
	resignScript   = lease.NewScript(scripts.ElectionResign)
)

// cleanupTimeout bounds the round trips that end a term, which run even when
// the caller's ctx has ended.
const cleanupTimeout = 5 * time.Second

// Campaign runs fn as the leader of the election called name, once this
// candidate's turn comes. It waits in line like Acquire (candidates lead in
// the order they arrived, woken by the release), takes office with value (at
// most MaxLeaderValue bytes), which Leader and Observe report, and runs fn
// with the term: the fencing token of its grant. fn must pass term to every
// fenced write, so that a deposed leader's writes are refused. The election
// is the lock called name, with a leader key beside it: do not also acquire
// that lock.
//
// While fn runs, the lease is refreshed every ttl/3, as Do does. fn's context
// is cancelled, with a cause matching ErrLockLost, as soon as leadership can
// no longer be confirmed before the lease's deadline; Campaign's error then
// matches ErrLockLost. When fn returns, leadership passes to the next
// candidate at once, with a new term; a fn that panics resigns too, and the
// panic goes on up the stack.
//
// Campaign returns fn's error. While waiting it returns what Acquire would:
// an error matching ErrNotObtained and ctx.Err() when ctx ends, ErrClosed
// when the Locker is closed, a Redis failure naming the election. Bad input
// is an error before anything is acquired: ErrInvalidKey, ErrInvalidTTL, a
// nil fn, a value over MaxLeaderValue. A candidate whose lease ends before it
// takes office gets ErrLockLost without fn having run.
func (l *Locker) Campaign(ctx context.Context, name string, ttl time.Duration, value []byte,
	fn func(ctx context.Context, term uint64) error) (err error) {
	l.mustExist("Campaign")
	switch {
	case fn == nil:
		return fmt.Errorf("correctness: Campaign in election %s: fn is nil", lease.Quote(name))
	case len(value) > MaxLeaderValue:
		return fmt.Errorf("correctness: Campaign in election %s: the value is %d bytes, over MaxLeaderValue (%d)",
			lease.Quote(name), len(value), MaxLeaderValue)
	}
	ctx, span := l.core.Telemetry().Start(ctx, "Campaign", name)
	defer func() {
		if errors.Is(err, ErrNotObtained) {
			telemetry.End(span, nil) // the wait ended: an outcome, not an error
			return
		}
		telemetry.End(span, err)
	}()
	h, err := l.core.Obtain(ctx, name, ttl)
	l.auditOnce(ctx, err)
	if err != nil {
		return err
	}
	telemetry.Term(ctx, h.Token())
	e := l.election(name)
	if err := e.announce(ctx, h, value); err != nil {
		return err
	}
	return e.lead(ctx, h, value, fn)
}

// Leader returns the current leader of the election called name: the value
// and term of the candidate in office. It returns an error matching
// ErrNoLeader when there is none (nobody holds the lock, or its holder has
// not taken office), ErrInvalidKey for a bad name, ErrClosed after Close,
// and a Redis failure naming the election. One round trip.
func (l *Locker) Leader(ctx context.Context, name string) (Leader, error) {
	l.mustExist("Leader")
	e, err := l.electionOf("read the leader of", name)
	if err != nil {
		return Leader{}, err
	}
	s, err := e.read(ctx)
	if err != nil {
		return Leader{}, err
	}
	if s.state != leading {
		return Leader{}, fmt.Errorf("%w: election %s", ErrNoLeader, lease.Quote(name))
	}
	return s.leader, nil
}

// election is one election's keys and channel.
type election struct {
	l    *Locker
	name string
	// leader is the leader key, and channel the channel of its notices
	// (the same name); keys are the KEYS of the election's scripts, the
	// lock's key and the leader key, boxed once.
	leader, channel string
	keys            []any
}

// election is the election called name.
func (l *Locker) election(name string) election {
	lock := scripts.LockKey(l.opts.prefix, name)
	leader := scripts.LeaderKey(lock)
	return election{l: l, name: name, leader: leader, channel: leader, keys: []any{lock, leader}}
}

// electionOf is election, for op (a phrase for errors) on an open Locker
// with a valid name.
func (l *Locker) electionOf(op, name string) (election, error) {
	if l.core.Closed() {
		return election{}, fmt.Errorf("%w: cannot %s election %s", ErrClosed, op, lease.Quote(name))
	}
	if err := lease.CheckName(ErrInvalidKey, name); err != nil {
		return election{}, err
	}
	return l.election(name), nil
}

// announce makes h's holder the leader, with value. When it cannot (the
// lease ended first, or Redis failed), the lease is released and the
// error says why.
func (e election) announce(ctx context.Context, h *lease.Held, value []byte) error {
	reply, err := announceScript.Run(ctx, e.l.conn, e.keys, h.Value(), value, e.channel)
	var done bool
	if err == nil {
		done, err = scripts.ReadDone(reply)
	}
	if done {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = h.Release(cctx)
	if err != nil {
		e.resign(ctx, h) // the reply may have been lost after it took office
		return lease.WrapRedis("correctness", "take office in election", e.name, lease.KeyErr(e.leader, err))
	}
	return fmt.Errorf("%w: election %s: the lease ended before its holder took office", ErrLockLost, lease.Quote(e.name))
}

// lead runs fn as the leader with lease h and value, and resigns when it
// returns. Its refreshes keep the leader key alive, and write it back with
// value when it was deleted.
func (e election) lead(ctx context.Context, h *lease.Held, value []byte, fn func(context.Context, uint64) error) error {
	h.Lead(e.leader, func(ctx context.Context) error {
		_, err := announceScript.Run(ctx, e.l.conn, e.keys, h.Value(), value, e.channel)
		return err
	})
	tel := e.l.core.Telemetry()
	tel.Leading(ctx, e.name, 1)
	var once sync.Once
	ended := func() { once.Do(func() { tel.Leading(context.WithoutCancel(ctx), e.name, -1) }) }
	defer func() {
		ended()
		e.resign(ctx, h)
	}()
	ran := false
	err := h.HoldAs(ctx, "Lead", func(ctx context.Context, h *lease.Held) error {
		ran = true
		stop := context.AfterFunc(ctx, func() {
			if errors.Is(context.Cause(ctx), ErrLockLost) {
				ended() // the term is over, though fn may still be winding down
			}
		})
		defer stop()
		return fn(ctx, h.Token())
	})
	if !ran && errors.Is(err, ErrNotHeld) {
		// The deadline passed while the candidate took office: release what
		// Redis may still hold, and say so as a lost term.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = h.Release(cctx)
		return fmt.Errorf("%w: election %s: the lease ended as its holder took office", ErrLockLost, lease.Quote(e.name))
	}
	return err
}

// resign clears the leader key of h's term, whose lease was released or
// lost, and tells the observers when nobody holds the lock. Best effort:
// otherwise they learn of it when the lease runs out.
func (e election) resign(ctx context.Context, h *lease.Held) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := resignScript.Run(ctx, e.l.conn, e.keys, h.Value(), e.channel); err != nil {
		e.l.opts.logger.Warn("correctness: a leader could not clear its leader key; observers learn that its term ended when its lease runs out",
			"election", e.name, "err", err)
	}
}

// sighting is what a read of an election found.
type sighting struct {
	state  state
	leader Leader        // when leading
	ttl    time.Duration // the lock's remaining ttl, unless free; negative: no expiry
}

// state is an election's state, as election_leader.lua reports it.
type state = scripts.Office

const (
	free    = scripts.OfficeFree    // nobody holds the lock
	waiting = scripts.OfficeWaiting // its holder has not taken office
	leading = scripts.OfficeLeading // its holder is the leader
)

// read reads the election's leader, with its lock.
func (e election) read(ctx context.Context) (sighting, error) {
	reply, err := leaderScript.Run(ctx, e.l.conn, e.keys, "1")
	if err == nil {
		var got scripts.Sighting
		if got, err = scripts.ReadLeader(reply, true); err == nil {
			s := sighting{state: got.Office, ttl: time.Duration(got.TTL) * time.Millisecond}
			if got.Office == leading {
				s.leader = Leader{Value: []byte(got.Value), Term: got.Term}
			}
			return s, nil
		}
	}
	return sighting{}, lease.WrapRedis("correctness", "read the leader of election", e.name, lease.KeyErr(e.leader, err))
}

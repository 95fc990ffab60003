package correctness

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/redis/go-redis/v9"
)

// Observe reports the leaders of the election called name. The channel gets
// the current leader first (the zero Leader when the election has none),
// then every change, in term order and never the same twice: each new
// leader, and the zero Leader when the election is left without one. It is
// closed when ctx ends.
//
// Observe learns of changes from the candidates, who announce them, and of a
// leader that died from a timer at its lease's deadline: it does not poll.
// A change reaches it about one round trip after it happens, or, for a
// leader that died, within its ttl plus about a second. A leader whose term
// is below one it has sent (brought back by a Redis failover that lost the
// newer grant) is not sent; fences refuse it too. A receiver that falls
// behind holds up the changes after the one it has not taken.
//
// Each Observe keeps a subscription connection of its own until ctx ends.
// It returns ErrInvalidKey for a bad name, ErrClosed after Close (which
// also ends the Observe calls under way, closing their channels), and a
// Redis failure naming the election when it cannot subscribe or read the
// leader.
func (l *Locker) Observe(ctx context.Context, name string) (<-chan Leader, error) {
	e, err := l.electionOf("observe", name)
	if err != nil {
		return nil, err
	}
	ps := l.client.Subscribe(ctx, e.channel)
	first, err := e.subscribed(ctx, ps)
	if err != nil {
		_ = ps.Close()
		return nil, err
	}
	o := &observer{
		e: e, ps: ps, out: make(chan Leader, 1),
		heard: make(chan any, 16), done: make(chan struct{}), received: make(chan struct{}),
		timer: time.NewTimer(time.Hour),
	}
	o.timer.Stop()
	o.apply(ctx, first, true) // into the channel's buffer: it cannot block
	// The Locker's Close ends the observer as ctx does.
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.closing, cancel)
	go o.receive()
	go func() {
		defer cancel()
		defer stop()
		o.run(ctx)
	}()
	return o.out, nil
}

// subscribeWait bounds the wait for Redis to confirm an observer's
// subscription.
const subscribeWait = 5 * time.Second

// subscribed waits for Redis to confirm ps's subscription, and then reads
// the leader: every change after that read is announced on the channel.
func (e election) subscribed(ctx context.Context, ps *redis.PubSub) (sighting, error) {
	msg, err := ps.ReceiveTimeout(ctx, subscribeWait)
	if err == nil {
		if _, ok := msg.(*redis.Subscription); !ok {
			err = fmt.Errorf("unexpected %T before the subscription's confirmation", msg)
		}
	}
	if err != nil {
		return sighting{}, lease.WrapRedis("correctness", "observe election", e.name, err)
	}
	return e.read(ctx)
}

// observer is one Observe call.
type observer struct {
	e     election
	ps    *redis.PubSub
	out   chan Leader
	heard chan any // receive's messages and subscription confirmations
	// done is closed when run ends, received when receive has.
	done, received chan struct{}
	timer          *time.Timer // at the deadline of the lock's holder
	told           told
	started        bool   // the current leader was sent
	unheard        uint64 // a term a read found in office before its announcement came
	failed         int    // reads in a row that failed
}

// recheck bounds how long an observer waits for an announcement that a read
// found due: announcements are the fast path, not the only one.
const recheck = time.Second

// receive hands ps's messages to run until run ends. After a lost
// connection go-redis subscribes again, and the confirmation tells run to
// read the leader: announcements made meanwhile were lost.
func (o *observer) receive() {
	defer close(o.received)
	var pause time.Duration
	for {
		msg, err := o.ps.Receive(context.Background())
		if err != nil {
			pause = min(max(2*pause, 10*time.Millisecond), recheck)
			select {
			case <-o.done:
				return
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		select {
		case o.heard <- msg:
		case <-o.done:
			return
		}
	}
}

// run sends the changes it hears of, and those that reads find, until ctx
// ends.
func (o *observer) run(ctx context.Context) {
	defer func() {
		o.timer.Stop()
		close(o.done)
		_ = o.ps.Close()
		<-o.received
		close(o.out)
	}()
	for {
		read, trusted := false, false
		select {
		case <-ctx.Done():
			return
		case <-o.timer.C:
			read = true
		case m := <-o.heard:
			switch m := m.(type) {
			case *redis.Subscription:
				read, trusted = m.Kind == "subscribe", true
			case *redis.Message:
				if !o.hear(ctx, m.Payload) {
					return
				}
			}
		}
		if read {
			s, ok := o.read(ctx)
			if !ok || !o.apply(ctx, s, trusted) {
				return
			}
		}
	}
}

// hear acts on a message; it returns false when ctx ended.
func (o *observer) hear(ctx context.Context, msg string) bool {
	n, ok := parseNotice(msg)
	switch {
	case !ok:
		return true
	case n.vacant:
		if o.told.vacant(n.leader.Term) {
			o.timer.Stop()
			return o.send(ctx, Leader{})
		}
	case o.told.elected(n.leader):
		o.arm(n.ttl)
		return o.send(ctx, n.leader)
	case n.leader.Term == o.told.last.Term:
		o.arm(n.ttl) // again, after a client retry
	}
	return true
}

// apply acts on what a read found; it returns false when ctx ended. Only a
// trusted read (the first, and the one after a lost connection) sends a new
// leader: its announcement may still be on its way, and others before it.
// A new leader whose announcement has not come by the next read, a second
// later, is sent then.
func (o *observer) apply(ctx context.Context, s sighting, trusted bool) bool {
	first := !o.started
	o.started = true
	x := s.leader
	switch {
	case s.state != leading:
		// The leader told of is gone: its lease ended or went to a
		// candidate that has not taken office.
		if s.state == waiting {
			o.arm(s.ttl)
		} else {
			o.timer.Stop()
		}
		if o.told.vacant(0) || first {
			return o.send(ctx, Leader{})
		}
	case x.Term <= o.told.highest:
		o.arm(s.ttl) // alive; or a deposed leader's grant brought back by a failover
	case trusted || x.Term == o.unheard:
		o.told.elected(x)
		o.arm(s.ttl)
		return o.send(ctx, x)
	default:
		o.unheard = x.Term
		d := recheck
		if s.ttl >= 0 {
			d = min(s.ttl, recheck)
		}
		o.arm(d)
	}
	return true
}

// arm sets the timer to the deadline of a lease with ttl left; a lease
// without expiry needs none.
func (o *observer) arm(ttl time.Duration) {
	o.timer.Stop()
	if ttl >= 0 {
		o.timer.Reset(ttl + time.Millisecond) // Redis expires a key once past its ttl
	}
}

// send sends v; it returns false when ctx ended first.
func (o *observer) send(ctx context.Context, v Leader) bool {
	select {
	case o.out <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

// read reads the election, trying again while Redis fails, until ctx ends.
func (o *observer) read(ctx context.Context) (sighting, bool) {
	pause := 10 * time.Millisecond
	for {
		s, err := o.e.read(ctx)
		if err == nil {
			o.failed = 0
			return s, true
		}
		if ctx.Err() != nil {
			return s, false
		}
		if o.failed++; o.failed == 1 {
			o.e.l.opts.logger.Warn("correctness: an observer cannot read the election's leader; trying again until its context ends",
				"election", o.e.name, "err", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return s, false
		case <-t.C:
		}
		pause = min(2*pause, recheck)
	}
}

// told is what an observer has sent: the last value, and the highest term.
type told struct {
	last    Leader
	highest uint64
}

// elected reports whether to send x, a leader in office: only a term above
// every one sent is.
func (t *told) elected(x Leader) bool {
	if x.Term <= t.highest {
		return false
	}
	t.last, t.highest = x, x.Term
	return true
}

// vacant reports whether to send the zero Leader, now that the leader of
// term (0: of whatever term was told last) has left office and nobody has
// taken its place: only when a leader was told last, and not a newer one.
func (t *told) vacant(term uint64) bool {
	if t.last.Term == 0 || term != 0 && t.last.Term > term {
		return false
	}
	t.last = Leader{}
	return true
}

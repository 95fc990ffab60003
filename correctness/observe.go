package correctness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/backoff"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/notify"
)

// Observe reports the leaders of the election called name. The channel gets
// the current leader first (the zero Leader when the election has none),
// then every change it sees: each new leader in rising term order, the same
// leader again with a new value (Proclaim) or after a vacancy, and the zero
// Leader when the election is left without one. It is closed when ctx ends.
//
// What Observe reports is always what the election's keys held at a read:
// the candidates' notices only tell it when to read, so a forged or stale
// message costs a read and changes nothing it reports. It reads after each
// notice, at the deadline of the lease it last saw (a leader that died
// announces nothing), and when its subscription comes back after a lost
// connection. A change reaches it about two round trips after it happens,
// or, for a leader that died, at its lease's deadline; a leader that came
// and went between two reads (a term shorter than a round trip) is not
// seen. A leader whose term is below one it has sent (brought back by a
// Redis failover that lost the newer grant) is not sent; fences refuse it
// too. A receiver that falls behind sees the newest leader when it takes
// the next one, not every one it missed.
//
// The Observe calls of one Locker share its subscription connection, and
// one read per change per election, however many observe. It returns
// ErrInvalidKey for a bad name, ErrClosed after Close (which also ends the
// Observe calls under way, closing their channels), and a Redis failure
// naming the election when it cannot subscribe or read the leader.
func (l *Locker) Observe(ctx context.Context, name string) (<-chan Leader, error) {
	l.mustExist("Observe")
	e, err := l.electionOf("observe", name)
	if err != nil {
		return nil, err
	}
	w, err := l.watch(ctx, e)
	if err != nil {
		return nil, err
	}
	o := &observer{w: w, out: make(chan Leader, 1), seen: make(chan sighting, 1), first: make(chan error, 1)}
	w.add(o)
	select {
	case err = <-o.first:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		l.unwatch(w, o)
		return nil, lease.WrapRedis("correctness", "observe election", name, err)
	}
	// The Locker's Close ends the observer as ctx does.
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.closing, cancel)
	go func() {
		defer close(o.out)
		defer l.unwatch(w, o)
		defer stop()
		defer cancel()
		o.run(ctx)
	}()
	return o.out, nil
}

// watch is one election's subscription and reads, shared by the observers
// of one Locker: its notices, on the Locker's notification connection, and
// the deadline of the lease it last saw, make it read the election, and
// every observer gets what the read found.
type watch struct {
	e    election
	sub  *notify.Waiter
	kick chan struct{} // a new observer wants a read now
	// ctx ends when the last observer leaves, and with it the reads.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	obs    map[*observer]bool // true until the observer has had a read
	n      int                // observers, under Locker.watchMu
}

// watch returns the election's watch, subscribed, with a place kept for
// one more observer.
func (l *Locker) watch(ctx context.Context, e election) (*watch, error) {
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	if w := l.watches[e.name]; w != nil {
		w.n++
		return w, nil
	}
	sub, err := l.core.Watch(ctx, e.channel)
	switch {
	case errors.Is(err, notify.ErrClosed):
		return nil, fmt.Errorf("%w: cannot observe election %s", ErrClosed, lease.Quote(e.name))
	case err != nil:
		return nil, lease.WrapRedis("correctness", "observe election", e.name, err)
	}
	w := &watch{e: e, sub: sub, kick: make(chan struct{}, 1), obs: make(map[*observer]bool), n: 1}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if l.watches == nil {
		l.watches = make(map[string]*watch)
	}
	l.watches[e.name] = w
	go w.run()
	return w, nil
}

// unwatch takes o off w, and ends w when it was the last observer.
func (l *Locker) unwatch(w *watch, o *observer) {
	w.mu.Lock()
	delete(w.obs, o)
	w.mu.Unlock()
	l.watchMu.Lock()
	defer l.watchMu.Unlock()
	if w.n--; w.n == 0 {
		delete(l.watches, w.e.name)
		w.cancel()
		w.sub.Leave()
	}
}

// add makes o an observer of w, and asks for the read that o starts with.
func (w *watch) add(o *observer) {
	w.mu.Lock()
	w.obs[o] = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// recheck bounds the pause between failed reads.
const recheck = time.Second

// run reads the election whenever a notice, a new observer, or the deadline
// of the lease last seen asks for it, and gives each observer what it found,
// until the last observer leaves.
func (w *watch) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	pause, failed := backoff.Backoff{First: 10 * time.Millisecond, Max: recheck}, 0
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.sub.Wake():
		case <-w.kick:
		case <-timer.C:
		}
		s, err := w.e.read(w.ctx)
		if w.ctx.Err() != nil {
			return
		}
		if err != nil {
			if failed++; failed == 1 {
				w.e.l.opts.logger.Warn("correctness: an observer cannot read the election's leader; trying again until it is stopped",
					"election", w.e.name, "err", err)
			}
			w.failed(err)
			timer.Reset(pause.Next())
			continue
		}
		pause.Reset()
		failed = 0
		timer.Stop()
		if s.state != free && s.ttl >= 0 {
			timer.Reset(s.ttl + time.Millisecond) // Redis expires a key once past its ttl
		}
		w.send(s)
	}
}

// send gives every observer s, replacing what it has not taken yet.
func (w *watch) send(s sighting) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for o, waiting := range w.obs {
		select {
		case <-o.seen:
		default:
		}
		o.seen <- s
		if waiting {
			w.obs[o] = false
			o.first <- nil
		}
	}
}

// failed tells the observers that are still waiting for their first read
// that it failed: Observe returns the error.
func (w *watch) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for o, waiting := range w.obs {
		if waiting {
			delete(w.obs, o)
			o.first <- err
		}
	}
}

// observer is one Observe call: what it has sent, and the reads it is given.
type observer struct {
	w     *watch
	out   chan Leader
	seen  chan sighting // the latest read not yet taken
	first chan error    // the outcome of the first read: nil, or why it failed
	told  told
}

// run sends the changes the reads find until ctx ends. The first read was
// taken already: it is the first thing sent.
func (o *observer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-o.seen:
			if x, ok := o.told.next(s); ok {
				select {
				case o.out <- x:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// told is what an observer has sent: the last value, and the highest term.
type told struct {
	started bool
	last    Leader
	highest uint64
}

// next returns what to send for a read that found s, if anything: the
// first read whatever it found; then a leader with a term above every one
// sent, or the one sent last again with a new value or after a vacancy; the
// zero Leader when nobody leads any more. A leader below a term sent is a
// deposed leader's grant brought back by a failover: nothing is sent.
func (t *told) next(s sighting) (Leader, bool) {
	first := !t.started
	t.started = true
	x := s.leader
	switch {
	case s.state != leading:
		if first || t.last.Term != 0 {
			t.last = Leader{}
			return Leader{}, true
		}
	case x.Term < t.highest:
	case first || x.Term > t.highest || t.last.Term == 0 || !bytes.Equal(x.Value, t.last.Value):
		t.last, t.highest = x, x.Term
		return x, true
	}
	return Leader{}, false
}

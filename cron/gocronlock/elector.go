package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/backoff"
)

// Elector is a gocron.Elector on a leasekit election: of the schedulers
// that share one election name, only the leader runs jobs. Pass it to
// gocron.WithDistributedElector. It is safe for concurrent use.
//
// It campaigns in the background from NewElector until Close (see
// correctness.Locker.Campaign): candidates lead in the order they arrived,
// a leader that is closed hands over at once, and one that dies is replaced
// within its ttl plus about a second. IsLeader answers from what the Elector
// knows, without a round trip, and stops answering nil as soon as the lease
// can no longer be confirmed before its deadline: it looks at the term's
// context, which compares the deadline with the clock at every look, so a
// scheduler resumed from a pause past the deadline runs no job. Term is the
// leader's
// fencing token: a job that writes anything that matters should pass it to
// a fence (correctness.Register, ExecFenced, a FencingProxy), because a
// leader that pauses past its lease can still be running a job while its
// successor starts one.
//
// Pick the Elector for many short jobs that may all run in one place: the
// schedulers' clocks only decide when the leader runs a job, not who runs
// it, so no minimum hold is needed, and a job costs no round trip. Pick the
// Locker (New) to spread jobs over schedulers: each run takes the job's lock,
// and the minimum hold keeps a scheduler whose clock is behind from running
// a tick again. Around a change of leader, the Elector has the Locker's
// problem once: a new leader whose clock is behind the old one's can run a
// tick the old leader ran already, or skip one the old leader had not reached.
// Fence the job's writes with Term where a second run would do harm.
type Elector struct {
	locker *correctness.Locker
	name   string
	opts   electorOptions
	cancel context.CancelFunc
	done   chan struct{} // closed when the campaigns have ended
	once   sync.Once

	mu   sync.Mutex
	term *term // the leadership under way, if any
}

var _ gocron.Elector = (*Elector)(nil)

// ErrNotLeader is IsLeader's error when the Elector does not lead.
var ErrNotLeader = errors.New("gocronlock: not the leader")

// term is one leadership: its fencing token, and the context Campaign gave
// fn, which ends with the term.
type term struct {
	token uint64
	ctx   context.Context
}

// ElectorOption configures an Elector.
type ElectorOption func(*electorOptions)

type electorOptions struct {
	ttl    time.Duration
	value  []byte
	logger *slog.Logger
}

// WithElectorTTL sets the leader's lease: it is refreshed every third of it,
// and a leader that dies is replaced within it plus about a second. Default:
// 10s. Under 1 ms is an error from NewElector.
func WithElectorTTL(d time.Duration) ElectorOption { return func(o *electorOptions) { o.ttl = d } }

// WithElectorValue sets what the leader tells the observers of its election
// (correctness.Locker.Leader and Observe), such as its host name. Default:
// none. Over correctness.MaxLeaderValue bytes is an error from NewElector.
func WithElectorValue(v []byte) ElectorOption {
	return func(o *electorOptions) { o.value = v }
}

// WithElectorLogger sets the logger for campaigns that fail (Redis cannot be
// reached, say), after which the Elector campaigns again. Default: none.
func WithElectorLogger(l *slog.Logger) ElectorOption {
	return func(o *electorOptions) { o.logger = l }
}

// NewElector returns an Elector that campaigns in the election called name
// through locker, which may serve other locks and elections too, and starts
// its campaign. It returns correctness.ErrInvalidKey for a bad name,
// correctness.ErrInvalidTTL for a ttl under 1 ms, and an error for a value
// over correctness.MaxLeaderValue. It panics if locker is nil, as New does.
// Close it when done: Close hands leadership over at once.
func NewElector(locker *correctness.Locker, name string, opts ...ElectorOption) (*Elector, error) {
	if locker == nil {
		panic("gocronlock: NewElector: nil correctness.Locker")
	}
	o := electorOptions{ttl: 10 * time.Second, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if name == "" || strings.HasPrefix(name, "}") {
		// the rule of correctness's names: see its ErrInvalidKey
		return nil, fmt.Errorf("gocronlock: NewElector: %w: %q is empty or starts with '}'", correctness.ErrInvalidKey, name)
	}
	if o.ttl < time.Millisecond {
		return nil, fmt.Errorf("gocronlock: NewElector: %w: %v is shorter than 1ms", correctness.ErrInvalidTTL, o.ttl)
	}
	if len(o.value) > correctness.MaxLeaderValue {
		return nil, fmt.Errorf("gocronlock: NewElector: the value is %d bytes, over correctness.MaxLeaderValue (%d)", len(o.value), correctness.MaxLeaderValue)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Elector{locker: locker, name: name, opts: o, cancel: cancel, done: make(chan struct{})}
	go e.campaign(ctx)
	return e, nil
}

// IsLeader returns nil while the Elector leads its election, and an error
// matching ErrNotLeader otherwise: before it has been elected, once its
// lease can no longer be confirmed before its deadline, and after Close. It
// makes no round trip.
func (e *Elector) IsLeader(context.Context) error {
	if e.Term() == 0 {
		return fmt.Errorf("%w of election %q", ErrNotLeader, e.name)
	}
	return nil
}

// Term returns the term of the Elector's leadership, its fencing token, or
// 0 when it does not lead (as IsLeader would say). Pass it to every fenced
// write a job makes.
func (e *Elector) Term() uint64 {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil || t.ctx.Err() != nil {
		return 0
	}
	return t.token
}

// Close ends the campaign: a leader resigns, handing leadership to the next
// candidate at once, and a waiting candidate leaves the line. It returns
// once that is done; calling it again is safe.
func (e *Elector) Close() error {
	e.once.Do(e.cancel)
	<-e.done
	return nil
}

// campaign campaigns until ctx ends: again at once after a lost term, and
// after a pause (growing to a second) after a failure.
func (e *Elector) campaign(ctx context.Context) {
	defer close(e.done)
	pause := backoff.Backoff{First: 10 * time.Millisecond, Max: time.Second}
	for {
		err := e.locker.Campaign(ctx, e.name, e.opts.ttl, e.opts.value, e.lead)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, correctness.ErrClosed):
			e.opts.logger.Warn("gocronlock: the Elector's Locker was closed; it no longer campaigns", "election", e.name)
			return
		case err == nil || errors.Is(err, correctness.ErrLockLost):
			pause.Reset()
			continue
		}
		e.opts.logger.Warn("gocronlock: campaign failed; campaigning again", "election", e.name, "err", err)
		if !pause.Sleep(ctx, nil) {
			return
		}
	}
}

// lead is the Elector's fn for Campaign: it holds leadership until ctx ends.
func (e *Elector) lead(ctx context.Context, token uint64) error {
	e.mu.Lock()
	e.term = &term{token: token, ctx: ctx}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.term = nil
		e.mu.Unlock()
	}()
	<-ctx.Done()
	return nil
}

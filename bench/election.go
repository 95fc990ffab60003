package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/scripts"
)

// election: three candidate processes (the bench re-executed) campaign in
// one leasekit election, with a ttl of electionTTL. Round after round the
// leader resigns (its fn returns) or is killed with SIGKILL, alternately; a
// killed candidate is replaced, so that two wait in line at every change.
// The takeover delay runs from the resignation, or from the killed leader's
// lease expiry (its PTTL, read once it is dead), to the next leader's fn
// starting, and to an Observe in the parent having the next leader. Every
// process reads the same wall clock.
const (
	electionTTL        = time.Second
	electionCandidates = 3
	// electionStep bounds each step of a round, past the ttl.
	electionStep = 10 * time.Second
)

// runCandidate is a candidate process: it campaigns until its stdin closes,
// says "lead <term> <unix ns>" when it takes office and "resign <unix ns>"
// when it resigns, which it does when it reads "resign".
func runCandidate(t *target, cc childConfig, in io.Reader, out io.Writer) error {
	l := correctness.New(t.client, correctness.WithAudit(false), correctness.WithLogger(slog.New(slog.DiscardHandler)))
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resign := make(chan struct{})
	go func() {
		defer cancel()
		for s := bufio.NewScanner(in); s.Scan(); {
			if s.Text() == "resign" {
				resign <- struct{}{}
			}
		}
	}()
	value := []byte(strconv.Itoa(os.Getpid()))
	for ctx.Err() == nil {
		err := l.Campaign(ctx, cc.Key, cc.TTL, value, func(ctx context.Context, term uint64) error {
			fmt.Fprintf(out, "lead %d %d\n", term, time.Now().UnixNano())
			select {
			case <-resign:
				fmt.Fprintf(out, "resign %d\n", time.Now().UnixNano())
			case <-ctx.Done():
			}
			return nil
		})
		if err != nil && ctx.Err() == nil && !errors.Is(err, correctness.ErrLockLost) {
			return err
		}
	}
	return nil
}

// said is a line a candidate said, parsed: what, and the times and term in it.
type said struct {
	who  *child
	what string // lead, resign
	term uint64
	at   time.Time
}

// electionRun is the election scenario under way.
type electionRun struct {
	b          *bench
	name       string
	lock       string
	queue      string
	candidates []*child
	leader     *child
	lines      chan said
	// early are lines read before the line awaited: the candidates' lines
	// reach lines from a goroutine each, in no set order.
	early []said
	seen  *sightings
	res   electionResult
	clock *miniClock // the in-process miniredis's, or nil
}

// electionResult is what the rounds measured.
type electionResult struct {
	resign, kill, observeResign, observeKill samples
	failures                                 int
	errs                                     []string
}

// election runs the election scenario.
func (b *bench) election(ctx context.Context) []row {
	const scenario = "election"
	e := &electionRun{b: b, name: b.key(scenario, "correctness"), lines: make(chan said, 64)}
	if b.target.mini != nil {
		e.clock = startMiniClock(b.target.mini)
		defer e.clock.stop()
	}
	e.lock = scripts.LockKey(scripts.DefaultPrefix, e.name)
	e.queue = scripts.QueueKey(e.lock)
	defer e.stop()
	if err := e.start(ctx); err != nil {
		e.res.failures++
		e.res.errs = append(e.res.errs, err.Error())
		return e.rows()
	}
	rounds := max(4, min(100, b.cfg.n/30))
	for r := range rounds {
		b.prog.say(scenario, fmt.Sprintf("round %d/%d", r+1, rounds))
		var err error
		if r%2 == 0 {
			err = e.resignRound(ctx)
		} else {
			err = e.killRound(ctx)
		}
		if err == nil {
			err = e.queued(ctx, electionCandidates-1)
		}
		if err != nil {
			e.res.failures++
			e.res.errs = append(e.res.errs, fmt.Sprintf("round %d: %v", r+1, err))
			break // the line is in an unknown state
		}
	}
	return e.rows()
}

// start observes the election and starts the candidates: the first leads,
// the others wait in line.
func (e *electionRun) start(ctx context.Context) error {
	observer := correctness.New(e.b.client, correctness.WithAudit(false), correctness.WithLogger(slog.New(slog.DiscardHandler)))
	octx, cancel := context.WithCancel(ctx)
	leaders, err := observer.Observe(octx, e.name)
	if err != nil {
		cancel()
		_ = observer.Close()
		return err
	}
	e.seen = &sightings{at: make(map[uint64]time.Time), changed: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go e.seen.watch(leaders, observer)
	for i := range electionCandidates {
		c, err := e.spawn()
		if err != nil {
			return err
		}
		if i == 0 {
			first, err := e.await(ctx, "lead", time.Time{}, electionStep)
			if err != nil {
				return err
			}
			e.leader = first.who
		}
		if err := e.queued(ctx, i); err != nil {
			return fmt.Errorf("candidate %d: %w", c.cmd.Process.Pid, err)
		}
	}
	return nil
}

// resignRound makes the leader resign and times its successor.
func (e *electionRun) resignRound(ctx context.Context) error {
	asked := time.Now()
	if _, err := fmt.Fprintln(e.leader.in, "resign"); err != nil {
		return err
	}
	gone, err := e.await(ctx, "resign", asked, electionStep)
	if err != nil {
		return err
	}
	next, err := e.await(ctx, "lead", gone.at, electionStep)
	if err != nil {
		return err
	}
	e.res.resign = append(e.res.resign, next.at.Sub(gone.at))
	return e.observed(ctx, next, gone.at, &e.res.observeResign)
}

// killRound kills the leader, replaces it, and times its successor from the
// dead leader's lease expiry.
func (e *electionRun) killRound(ctx context.Context) error {
	dead, killed := e.leader, time.Now()
	_ = dead.cmd.Process.Signal(syscall.SIGKILL)
	_ = dead.cmd.Wait()
	// The expiry is reckoned from a time no later than the server's reading
	// of the ttl (which PTTL rounds down to the ms), so that it is never late
	// and a delay measured from it never too short: from just before the
	// request, or from when the miniredis clock was last brought up to date.
	expiry := time.Now()
	if e.clock != nil {
		expiry = e.clock.now()
	}
	pipe := e.b.client.Pipeline()
	pttl := pipe.PTTL(ctx, e.lock)
	value := pipe.Get(ctx, e.lock)
	_, _ = pipe.Exec(ctx)
	left, err := pttl.Result()
	if err != nil {
		return fmt.Errorf("PTTL: %w", err)
	}
	// A key with waiters queued outlives its lease (its mark says by how
	// much): the lease is what the next leader waits for.
	p, _ := scripts.ParseValue(value.Val(), true)
	if left = p.LeaseLeft(left); left > 0 {
		expiry = expiry.Add(left)
	}
	e.drop(dead)
	if _, err := e.spawn(); err != nil {
		return err
	}
	next, err := e.await(ctx, "lead", killed, electionTTL+electionStep)
	if err != nil {
		return err
	}
	e.res.kill = append(e.res.kill, next.at.Sub(expiry))
	return e.observed(ctx, next, expiry, &e.res.observeKill)
}

// observed records how long after the change at since the observer had
// the new leader in l.
func (e *electionRun) observed(ctx context.Context, l said, since time.Time, into *samples) error {
	e.leader = l.who
	at, err := e.seen.await(ctx, l.term, electionStep)
	if err != nil {
		return err
	}
	*into = append(*into, at.Sub(since))
	return nil
}

// spawn starts a candidate process.
func (e *electionRun) spawn() (*child, error) {
	cc := e.b.childConfig(e.name)
	cc.TTL = electionTTL
	c, err := startChild(context.Background(), "candidate", cc)
	if err != nil {
		return nil, err
	}
	e.candidates = append(e.candidates, c)
	go e.read(c)
	return c, nil
}

// read passes what c says to e.lines until its output ends.
func (e *electionRun) read(c *child) {
	for s := bufio.NewScanner(c.out); s.Scan(); {
		f := strings.Fields(s.Text())
		l := said{who: c}
		var ns int64
		var err error
		switch {
		case len(f) == 3 && f[0] == "lead":
			l.what = f[0]
			l.term, err = strconv.ParseUint(f[1], 10, 64)
			ns, _ = strconv.ParseInt(f[2], 10, 64)
		case len(f) == 2 && f[0] == "resign":
			l.what = f[0]
			ns, err = strconv.ParseInt(f[1], 10, 64)
		default:
			continue
		}
		if err == nil {
			l.at = time.Unix(0, ns)
			e.lines <- l
		}
	}
}

// await waits up to limit for a candidate to say what after since, and
// returns the first such line, in the order the candidates said them. Lines
// from before since are stale (a leader replaced between rounds) and dropped.
func (e *electionRun) await(ctx context.Context, what string, since time.Time, limit time.Duration) (said, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		e.early = slices.DeleteFunc(e.early, func(l said) bool { return l.at.Before(since) })
		slices.SortFunc(e.early, func(a, b said) int { return a.at.Compare(b.at) })
		for i, l := range e.early {
			if l.what == what {
				e.early = slices.Delete(e.early, i, i+1)
				return l, nil
			}
		}
		select {
		case l := <-e.lines:
			e.early = append(e.early, l)
		case <-t.C:
			return said{}, fmt.Errorf("no candidate said %q within %v%s", what, limit, e.errors())
		case <-ctx.Done():
			return said{}, ctx.Err()
		}
	}
}

// queued waits until n candidates wait in the election's queue.
func (e *electionRun) queued(ctx context.Context, n int) error {
	for deadline := time.Now().Add(electionStep); ; time.Sleep(2 * time.Millisecond) {
		got, err := e.b.client.ZCard(ctx, e.queue).Result()
		if err != nil {
			return fmt.Errorf("ZCARD: %w", err)
		}
		if got == int64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d candidates in line after %v, want %d%s", got, electionStep, n, e.errors())
		}
	}
}

// errors is what the candidates wrote to stderr, if anything.
func (e *electionRun) errors() string {
	var out []string
	for _, c := range e.candidates {
		if s := c.said(); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; candidates said: " + strings.Join(out, "; ")
}

func (e *electionRun) drop(c *child) {
	for i, o := range e.candidates {
		if o == c {
			e.candidates = append(e.candidates[:i], e.candidates[i+1:]...)
			return
		}
	}
}

// stop ends the candidates (a leader resigns as it goes) and the observer.
func (e *electionRun) stop() {
	for _, c := range e.candidates {
		_ = c.in.Close()
	}
	for _, c := range e.candidates {
		_ = c.cmd.Wait()
	}
	if e.seen != nil {
		e.seen.stop()
	}
}

func (e *electionRun) rows() []row {
	r := &e.res
	mk := func(lib, from string, s samples, failures int) row {
		return row{Scenario: "election", Lib: lib, Config: from, N: len(s),
			P50: int64(s.p50()), P99: int64(s.p99()), WaitMax: int64(s.max()), Failures: failures}
	}
	if len(r.errs) > 0 {
		e.b.note("note: election: " + strings.Join(r.errs, "; "))
	}
	return []row{
		mk("correctness (resign)", "the leader's fn returns → the next leader's fn starts", r.resign, r.failures),
		mk("correctness (kill -9)", "the killed leader's lease expires → the next leader's fn starts", r.kill, 0),
		mk("observer (resign)", "the leader's fn returns → Observe has the next leader", r.observeResign, 0),
		mk("observer (kill -9)", "the killed leader's lease expires → Observe has the next leader", r.observeKill, 0),
	}
}

// electionColumns are the election table's columns.
func electionColumns() []column {
	return []column{libColumn, nColumn, p50Column, p99Column,
		{"max", func(r row) string { return fmtDur(time.Duration(r.WaitMax)) }},
		failuresCol, {"from → to", func(r row) string { return r.Config }}}
}

// sightings are the leaders an Observe saw, by term, with when.
type sightings struct {
	mu      sync.Mutex
	at      map[uint64]time.Time
	changed chan struct{}
	cancel  context.CancelFunc // ends the Observe
	done    chan struct{}      // closed when watch has returned
}

// watch records the leaders until the channel closes, then closes l.
func (s *sightings) watch(leaders <-chan correctness.Leader, l *correctness.Locker) {
	defer close(s.done)
	defer l.Close()
	for v := range leaders {
		if v.Term == 0 {
			continue
		}
		s.mu.Lock()
		s.at[v.Term] = time.Now()
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

// await waits up to limit for the leader of term, and returns when it was
// seen.
func (s *sightings) await(ctx context.Context, term uint64, limit time.Duration) (time.Time, error) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		s.mu.Lock()
		at, ok := s.at[term]
		changed := s.changed
		s.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-changed:
		case <-t.C:
			return time.Time{}, fmt.Errorf("the observer did not see term %d within %v", term, limit)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

func (s *sightings) stop() {
	s.cancel()
	<-s.done
}

// miniClock moves an in-process miniredis's key expiry with the real clock,
// as a server's runs: every 5 ms, and at once when asked.
type miniClock struct {
	mini    *miniredis.Miniredis
	mu      sync.Mutex
	last    time.Time // what the miniredis clock has been brought up to
	done    chan struct{}
	stopped chan struct{}
}

func startMiniClock(m *miniredis.Miniredis) *miniClock {
	c := &miniClock{mini: m, last: time.Now(), done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(c.stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.done:
				return
			case <-tick.C:
				c.now()
			}
		}
	}()
	return c
}

// now brings the miniredis clock up to the real one, and returns the time
// it brought it to.
func (c *miniClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.mini.FastForward(now.Sub(c.last))
	c.last = now
	return now
}

func (c *miniClock) stop() {
	close(c.done)
	<-c.stopped
}

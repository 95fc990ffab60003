package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/redis/go-redis/v9"
)

// The semaphore scenario: leasekit's Semaphore (no peer library has one),
// with semLimit permits, in this process (C goroutines, for each of
// -contenders) and across processes (P workers of -per-proc contenders,
// for each of -procs). As in convoy-procs, the bench holds every permit
// while the contenders arrive one at a time, 2 ms apart; then it releases
// them, and the contenders drain: each takes a permit, holds it for -hold
// and releases it.
//
// makespan runs from the first of those releases to the last contender's;
// the ideal is acquisitions × hold ÷ N (the measured hold). max holders is
// the most contenders (and the bench's own permits) seen holding at once,
// each from its acquire's return to its release's call, on the clock every
// process shares: a lower bound of what the server held, which must stay at
// most N. out of order counts the handoffs the server made to a waiter
// while one queued before it still waited: the grant messages, read by a
// subscriber of the bench's own, against the queue's order. (The order in
// which the acquires return is no measure: with N holders, two grants often
// come microseconds apart, and their waiters wake in either order.)
const semLimit = 4

func init() {
	scenarioNames = append(scenarioNames, "semaphore")
	extraScenarios = append(extraScenarios, scenario{name: "semaphore", run: (*bench).semaphore})
	extraRoles["semaphore-worker"] = runSemaphoreWorker
	extraColumns["semaphore"] = semaphoreColumns
}

// semWorkerConfig is what a semaphore worker is told.
type semWorkerConfig struct {
	URL     string        `json:"url,omitempty"`
	Addrs   []string      `json:"addrs"`
	Cluster bool          `json:"cluster,omitempty"`
	TTL     time.Duration `json:"ttl"`
	Hold    time.Duration `json:"hold"`
	Name    string        `json:"name"`
	Index   int           `json:"index"`
	Procs   int           `json:"procs"`
	PerProc int           `json:"per_proc"`
	Stagger time.Duration `json:"stagger"`
}

// semWorkerEnv carries a semaphore worker's semWorkerConfig, as JSON.
const semWorkerEnv = "LEASEKIT_BENCH_SEMAPHORE"

// runSemaphoreWorker is a semaphore worker: it opens a Locker, warms up,
// says it is ready, waits for "go <unix ns>", runs its contenders and
// reports, as a convoy-procs worker does.
func runSemaphoreWorker(in io.Reader, out io.Writer) error {
	var wc semWorkerConfig
	if err := json.Unmarshal([]byte(os.Getenv(semWorkerEnv)), &wc); err != nil {
		return fmt.Errorf("%s: %w", semWorkerEnv, err)
	}
	t, err := dial(config{url: wc.URL, addr: wc.Addrs[0], cluster: map[bool][]string{true: wc.Addrs}[wc.Cluster]})
	if err != nil {
		return err
	}
	defer t.close()
	l := efficiency.New(t.client)
	defer l.Close()
	ctx := context.Background()
	warmUpSemaphore(ctx, l, wc.Name+":warm")
	// A connection per contender, dialled now: a handshake in the timed
	// run would count among its commands.
	var dials sync.WaitGroup
	for range wc.PerProc {
		dials.Go(func() { _ = t.client.Ping(ctx).Err() })
	}
	dials.Wait()
	fmt.Fprintln(out, `{"ready":true}`)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	start, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "go ")), 10, 64)
	if err != nil {
		return fmt.Errorf("go line %q: %w", line, err)
	}
	s := l.Semaphore(wc.Name, semLimit)
	seen := make([]procContender, wc.PerProc)
	before := t.sent.counts()
	var wg sync.WaitGroup
	for c := range seen {
		arrival := time.Unix(0, start).Add(time.Duration(c*wc.Procs+wc.Index) * wc.Stagger)
		wg.Go(func() { seen[c] = semContend(ctx, s, arrival, wc.TTL, wc.Hold) })
	}
	wg.Wait()
	sent := t.sent.counts()
	for name, n := range before {
		sent[name] -= n
	}
	return json.NewEncoder(out).Encode(workerReport{Contenders: seen, Sent: sent})
}

// warmUpSemaphore takes the one permit of a semaphore called name while a
// second contender waits for it, so that the scripts, connections and the
// grant subscription are ready before the timed run. Best effort, bounded.
func warmUpSemaphore(ctx context.Context, l *efficiency.Locker, name string) {
	ctx, cancel := context.WithTimeout(ctx, warmUpLimit)
	defer cancel()
	s := l.Semaphore(name, 1)
	p, err := s.Acquire(ctx, warmUpLimit)
	if err != nil {
		return
	}
	second := make(chan struct{})
	go func() {
		defer close(second)
		if p, err := s.Acquire(ctx, warmUpLimit); err == nil {
			_ = p.Release(ctx)
		}
	}()
	time.Sleep(warmUpHold)
	_ = p.Release(ctx)
	<-second
}

// semContend arrives at arrival, acquires a permit (giving up after one
// ttl), holds it and releases it.
func semContend(ctx context.Context, s *efficiency.Semaphore, arrival time.Time, ttl, hold time.Duration) procContender {
	time.Sleep(time.Until(arrival))
	c := procContender{Arrival: time.Now().UnixNano()}
	actx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	p, err := s.Acquire(actx, ttl)
	c.Granted = time.Now().UnixNano()
	if err != nil {
		c.Err = err.Error()
		return c
	}
	time.Sleep(hold)
	c.Releasing = time.Now().UnixNano()
	if err := p.Release(ctx); err != nil {
		c.Err = "release: " + err.Error()
	}
	c.Released = time.Now().UnixNano()
	return c
}

// semResult pools one setting's runs.
type semResult struct {
	makespans, holds, waits samples
	acquired, failures      int
	outOfOrder, overlaps    int
	unannounced             int // grants made by a waiter's own attempt
	maxHolders              int
	serverUsec, serverCalls float64
	serverKnown             bool
	sent                    int64 // commands the contenders' clients sent
	errs                    []string
}

// semaphore runs the scenario: in this process for each -contenders, then
// across processes for each -procs.
func (b *bench) semaphore(ctx context.Context) []row {
	const scenario = "semaphore"
	if !slices.Contains(b.cfg.libs, "efficiency") {
		b.note("note: the semaphore scenario runs leasekit's efficiency Semaphore only; -libs left it out")
		return nil
	}
	l := efficiency.New(b.client)
	defer l.Close()
	b.prog.say(scenario, "warm-up")
	warmUpSemaphore(ctx, l, b.key(scenario, "warm"))
	var rows []row
	settings := make([][2]int, 0, len(b.cfg.contenders)+len(b.cfg.procs)) // {P, C}; P 0: this process
	for _, c := range b.cfg.contenders {
		settings = append(settings, [2]int{0, c})
	}
	for _, p := range b.cfg.procs {
		settings = append(settings, [2]int{p, b.cfg.perProc})
	}
	for _, set := range settings {
		var res semResult
		for r := range b.convoyReps() {
			b.prog.say(scenario, fmt.Sprintf("P=%d C=%d run %d/%d", set[0], set[1], r+1, b.convoyReps()))
			if err := b.runSemaphore(ctx, l, &res, set); err != nil {
				res.errs = append(res.errs, err.Error())
			}
		}
		rows = append(rows, res.row(set, b))
	}
	return rows
}

// runSemaphore runs the contenders of one setting {P, C} once.
func (b *bench) runSemaphore(ctx context.Context, l *efficiency.Locker, res *semResult, set [2]int) error {
	p, n := set[0], set[1]*max(set[0], 1)
	name := b.key("semaphore", fmt.Sprintf("P%dC%d", p, set[1]))
	var ws []*worker
	if p > 0 {
		var err error
		if ws, err = b.startSemaphoreWorkers(ctx, name, p); err != nil {
			return err
		}
	}
	s := l.Semaphore(name, semLimit)
	runStart := time.Now()
	var blockers []*efficiency.Lock
	for range semLimit {
		permit, err := s.TryAcquire(ctx, b.cfg.ttl)
		if err != nil {
			stopWorkers(ws)
			return fmt.Errorf("the bench's own permits: %w", err)
		}
		blockers = append(blockers, permit)
	}
	watch, err := b.watchGrants(ctx, name)
	if err != nil {
		stopWorkers(ws)
		return fmt.Errorf("watching the grants: %w", err)
	}
	defer watch.close()
	before := b.costSnap(ctx)
	start := time.Now().Add(procStartIn)
	var seen []procContender
	var wg sync.WaitGroup
	if p == 0 {
		seen = make([]procContender, n)
		for i := range seen {
			arrival := start.Add(time.Duration(i) * b.stagger())
			wg.Go(func() { seen[i] = semContend(ctx, s, arrival, b.cfg.ttl, b.cfg.hold) })
		}
	}
	for _, w := range ws {
		fmt.Fprintf(w.in, "go %d\n", start.UnixNano())
	}
	time.Sleep(time.Until(start.Add(time.Duration(n)*b.stagger() + procSettle)))
	if err := watch.queued(ctx); err != nil {
		stopWorkers(ws)
		return fmt.Errorf("reading the queue: %w", err)
	}
	t0 := time.Now()
	own := make([]procContender, len(blockers)) // the bench's permits, as holders
	for i, permit := range blockers {
		own[i] = procContender{Granted: runStart.UnixNano(), Releasing: time.Now().UnixNano()}
		if err := permit.Release(ctx); err != nil {
			stopWorkers(ws)
			return fmt.Errorf("the bench's release: %w", err)
		}
	}
	wg.Wait()
	sent := make(map[string]int64)
	var errs []error
	if p == 0 {
		for name, k := range b.target.sent.counts() {
			sent[name] = k - before.sent[name]
		}
	}
	for _, w := range ws {
		r, err := w.report()
		errs = append(errs, err)
		seen = append(seen, r.Contenders...)
		for name, k := range r.Sent {
			sent[name] += k
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var workersSent map[string]int64
	if p > 0 {
		workersSent = sent
	}
	c := costOf(before, b.costSnap(ctx), n, workersSent)
	if err := watch.drain(ctx); err != nil {
		return fmt.Errorf("reading the grants: %w", err)
	}
	res.add(seen, own, t0, c, sent)
	res.outOfOrder += watch.outOfOrder()
	res.unannounced += n - watch.announced()
	return nil
}

// grantWatch reads the grant messages of one semaphore's waiters, as the
// server sends them, to tell the order in which it served its queue.
type grantWatch struct {
	b       *bench
	name    string
	sharded bool
	ps      *redis.PubSub
	sync    string   // a channel of the bench's own, in the pattern or slot
	order   []string // the queued waiters' ids, in queue order
	mu      sync.Mutex
	granted []string // ids, in the order of the grant messages
	synced  chan struct{}
	done    chan struct{}
}

// watchGrants starts watching the grants of the semaphore called name. On one
// server it subscribes to every grant channel at once (PSUBSCRIBE, which a
// release does not count as a live waiter); in a cluster, whose grant
// channels are sharded, it subscribes to the waiters' channels once they
// have queued (queued).
func (b *bench) watchGrants(ctx context.Context, name string) (*grantWatch, error) {
	w := &grantWatch{b: b, name: name, synced: make(chan struct{}, 1), done: make(chan struct{})}
	permits := lease.PermitsKey(lease.DefaultPrefix, name)
	c, ok := b.client.(*redis.Client)
	if !ok {
		w.sharded, w.sync = true, permits+":grants:bench"
		return w, nil
	}
	w.sync = lease.DefaultPrefix + "grants:bench-" + b.id
	w.ps = c.PSubscribe(ctx, lease.DefaultPrefix+"grants:*")
	if _, err := w.ps.Receive(ctx); err != nil {
		_ = w.ps.Close()
		return nil, err
	}
	go w.read()
	return w, nil
}

// queued reads the queue's order, once every contender has queued; in a
// cluster, it subscribes to their grant channels then.
func (w *grantWatch) queued(ctx context.Context) error {
	queue := lease.QueueKey(lease.PermitsKey(lease.DefaultPrefix, w.name))
	entries, err := w.b.client.ZRange(ctx, queue, 0, -1).Result()
	if err != nil {
		return err
	}
	channels := []string{w.sync}
	for _, e := range entries {
		if id, channel, ok := lease.EntryTicket(e); ok {
			w.order = append(w.order, id)
			if !slices.Contains(channels, channel) {
				channels = append(channels, channel)
			}
		}
	}
	if !w.sharded {
		return nil
	}
	w.ps = w.b.client.(*redis.ClusterClient).SSubscribe(ctx, channels...)
	for range channels {
		if _, err := w.ps.Receive(ctx); err != nil {
			return err
		}
	}
	go w.read()
	return nil
}

func (w *grantWatch) read() {
	defer close(w.done)
	for m := range w.ps.Channel() {
		if m.Channel == w.sync {
			w.synced <- struct{}{}
			continue
		}
		if id, ok := lease.GrantTicket(m.Payload); ok {
			w.mu.Lock()
			w.granted = append(w.granted, id)
			w.mu.Unlock()
		}
	}
}

// drain waits until every grant message sent so far has been read: a
// message of the bench's own, sent now, comes after them.
func (w *grantWatch) drain(ctx context.Context) error {
	publish := w.b.client.Publish
	if w.sharded {
		publish = w.b.client.SPublish
	}
	if err := publish(ctx, w.sync, "").Err(); err != nil {
		return err
	}
	select {
	case <-w.synced:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("the grant subscriber read nothing within 5s")
	}
}

// announced is how many queued waiters were handed a permit by a release;
// the others took one at an attempt of their own.
func (w *grantWatch) announced() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, id := range w.granted {
		if slices.Contains(w.order, id) {
			n++
		}
	}
	return n
}

// outOfOrder counts the handoffs to a waiter made while one queued before it
// was handed its permit later.
func (w *grantWatch) outOfOrder() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var places []int
	for _, id := range w.granted {
		if i := slices.Index(w.order, id); i >= 0 {
			places = append(places, i)
		}
	}
	n := 0
	for i, p := range places {
		if slices.ContainsFunc(places[i+1:], func(q int) bool { return q < p }) {
			n++
		}
	}
	return n
}

func (w *grantWatch) close() {
	if w.ps != nil {
		_ = w.ps.Close()
		<-w.done
	}
}

// startSemaphoreWorkers starts p workers on the semaphore called name and
// waits until each is ready.
func (b *bench) startSemaphoreWorkers(ctx context.Context, name string, p int) ([]*worker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ws []*worker
	for i := range p {
		wc, _ := json.Marshal(semWorkerConfig{
			URL: b.cfg.url, Addrs: b.target.addrs, Cluster: b.target.cluster, TTL: b.cfg.ttl, Hold: b.cfg.hold,
			Name: name, Index: i, Procs: p, PerProc: b.cfg.perProc, Stagger: b.stagger(),
		})
		w := &worker{cmd: exec.CommandContext(ctx, self)}
		w.cmd.Env = append(os.Environ(), roleEnv+"=semaphore-worker", semWorkerEnv+"="+string(wc))
		w.cmd.Stderr = &w.stderr
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if w.in, err = w.cmd.StdinPipe(); err == nil {
			var out io.Reader
			if out, err = w.cmd.StdoutPipe(); err == nil {
				w.out = bufio.NewReader(out)
				err = w.cmd.Start()
			}
		}
		if err != nil {
			stopWorkers(ws)
			return nil, err
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		if line, err := w.out.ReadString('\n'); err != nil || !strings.Contains(line, "ready") {
			stopWorkers(ws)
			return nil, fmt.Errorf("semaphore worker did not get ready (%v): %s", err, strings.TrimSpace(w.stderr.String()))
		}
	}
	return ws, nil
}

// add pools one run: its contenders, the bench's own permits, the first
// release at t0, its server cost and the commands its contenders sent.
func (r *semResult) add(cs, own []procContender, t0 time.Time, c cost, sent map[string]int64) {
	var ok []procContender
	for _, c := range cs {
		if c.Err != "" {
			r.failures++
			if len(r.errs) < 3 {
				r.errs = append(r.errs, c.Err)
			}
			continue
		}
		ok = append(ok, c)
	}
	slices.SortFunc(ok, func(a, b procContender) int { return int(a.Granted - b.Granted) })
	last := t0.UnixNano()
	for _, c := range ok {
		r.waits = append(r.waits, time.Duration(c.Granted-c.Arrival))
		r.holds = append(r.holds, time.Duration(c.Releasing-c.Granted))
		last = max(last, c.Released)
	}
	most, beyond := holdersAtOnce(append(own, ok...))
	r.maxHolders = max(r.maxHolders, most)
	r.overlaps += beyond
	r.acquired += len(ok)
	if len(ok) > 0 {
		r.makespans = append(r.makespans, time.Duration(last-t0.UnixNano()))
	}
	if c.serverUsec != nil {
		r.serverKnown = true
		r.serverUsec += *c.serverUsec * float64(len(cs))
		r.serverCalls += *c.serverCalls * float64(len(cs))
	}
	for _, k := range sent {
		r.sent += k
	}
}

// holdersAtOnce is the most holders whose [Granted, Releasing] intervals
// overlap, and how many grants came while semLimit others held.
func holdersAtOnce(cs []procContender) (most, beyond int) {
	type event struct {
		at    int64
		delta int
	}
	events := make([]event, 0, 2*len(cs))
	for _, c := range cs {
		events = append(events, event{c.Granted, 1}, event{c.Releasing, -1})
	}
	// A release at the same instant as a grant counts first.
	slices.SortFunc(events, func(a, b event) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	now := 0
	for _, e := range events {
		now += e.delta
		if e.delta > 0 && now > semLimit {
			beyond++
		}
		most = max(most, now)
	}
	return most, beyond
}

func (r *semResult) row(set [2]int, b *bench) row {
	per := r.acquired / max(len(r.makespans), 1) // acquisitions per run
	ideal := time.Duration(per) * r.holds.mean() / semLimit
	makespan := r.makespans.p50()
	n := float64(max(r.acquired+r.failures, 1))
	out := row{
		Scenario: "semaphore", Lib: "efficiency", Procs: set[0], Contenders: set[1],
		Config: fmt.Sprintf("leasekit efficiency: one efficiency.New(client) per process, Semaphore(name, %d); Acquire(ctx, %v), hold %v, Release", semLimit, b.cfg.ttl, b.cfg.hold),
		N:      r.acquired + r.failures, Acquired: r.acquired, Limit: semLimit, MaxHolders: r.maxHolders,
		P50: int64(r.waits.p50()), P99: int64(r.waits.p99()), WaitP99: int64(r.waits.p99()), WaitMax: int64(r.waits.max()),
		Ratio: ratio(makespan, ideal), RatioTo: "ideal makespan",
		IdealNs: int64(ideal), Makespan: int64(makespan), HoldNs: int64(r.holds.mean()),
		OutOfOrder: &r.outOfOrder, TripsPerOp: float64(r.sent) / n,
		Failures: r.failures, Overlaps: r.overlaps,
	}
	if r.serverKnown {
		usec, calls := r.serverUsec/n, r.serverCalls/n
		out.ServerUsecPerAcq, out.ServerCallsPerAcq = &usec, &calls
	}
	if len(r.errs) > 0 {
		b.note(fmt.Sprintf("note: semaphore P=%d C=%d: %d failures, e.g. %s", set[0], set[1], r.failures, r.errs[0]))
	}
	if r.unannounced > 0 {
		b.note(fmt.Sprintf("note: semaphore P=%d C=%d: %d grants were made by a waiter's own attempt, not a release, and are left out of the order", set[0], set[1], r.unannounced))
	}
	return out
}

// semaphoreColumns are the semaphore scenario's table.
func semaphoreColumns() []column {
	return []column{
		{"P", func(r row) string {
			if r.Procs == 0 {
				return "this"
			}
			return fmt.Sprint(r.Procs)
		}},
		{"C", func(r row) string { return fmt.Sprint(r.Contenders) }},
		{"N", func(r row) string { return fmt.Sprint(r.Limit) }},
		{"acquired", func(r row) string { return fmt.Sprint(r.Acquired) }},
		{"makespan", func(r row) string { return fmtDur(time.Duration(r.Makespan)) }},
		{"ideal", func(r row) string { return fmtDur(time.Duration(r.IdealNs)) }},
		{"÷ ideal", func(r row) string { return fmt.Sprintf("%.2f×", r.Ratio) }},
		{"max holders", func(r row) string { return fmt.Sprint(r.MaxHolders) }},
		{"out of order", func(r row) string { return fmt.Sprint(*r.OutOfOrder) }},
		{"wait p50", func(r row) string { return fmtDur(time.Duration(r.P50)) }},
		{"wait p99", func(r row) string { return fmtDur(time.Duration(r.P99)) }},
		{"cmds/acq", func(r row) string { return fmt.Sprintf("%.2f", r.TripsPerOp) }},
		{"srv µs/acq", func(r row) string { return fmtOpt(r.ServerUsecPerAcq, "%.1f") }},
		{"srv cmds/acq", func(r row) string { return fmtOpt(r.ServerCallsPerAcq, "%.1f") }},
		{"failures", func(r row) string { return fmt.Sprint(r.Failures) }},
	}
}

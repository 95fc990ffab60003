package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/scripts"
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
}

// openSemaphoreWorker readies a semaphore worker: a Locker on t, warmed
// up, and a connection per contender, and the contention for a permit of
// the semaphore called cc.Key.
func openSemaphoreWorker(ctx context.Context, t *target, cc childConfig) (contention, func(), error) {
	l := efficiency.New(t.client)
	warmUpSemaphore(ctx, l, cc.Key+":warm")
	// A connection per contender, dialled now: a handshake in the timed
	// run would count among its commands.
	var dials sync.WaitGroup
	for range cc.PerProc {
		dials.Go(func() { _ = t.client.Ping(ctx).Err() })
	}
	dials.Wait()
	c := contention{acquire: semAcquire(l.Semaphore(cc.Key, semLimit), cc.TTL), ttl: cc.TTL, hold: cc.Hold}
	return c, func() { _ = l.Close() }, nil
}

// warmUpSemaphore warms up a semaphore called name of one permit, as
// warmUp does a lock: the scripts, connections and the grant subscription
// are then ready before the timed run.
func warmUpSemaphore(ctx context.Context, l *efficiency.Locker, name string) {
	warmUp(ctx, semAcquire(l.Semaphore(name, 1), warmUpLimit))
}

// semAcquire is a contention's acquire of a permit of s, for ttl.
func semAcquire(s *efficiency.Semaphore, ttl time.Duration) func(ctx context.Context) (held, error) {
	return func(ctx context.Context) (held, error) {
		p, err := s.Acquire(ctx, ttl)
		if err != nil {
			return nil, err // never a non-nil held holding a nil permit
		}
		return p, nil
	}
}

// semResult pools one setting's runs.
type semResult struct {
	pool
	outOfOrder  int
	unannounced int // grants made by a waiter's own attempt
	maxHolders  int
	sent        int64 // commands the contenders' clients sent
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
	ws, err := startWorkers(ctx, "semaphore-worker", b.childConfig(name), p)
	if err != nil {
		return err
	}
	s := l.Semaphore(name, semLimit)
	own, err := takePermits(ctx, s, b.cfg.ttl)
	if err != nil {
		stopWorkers(ws)
		return fmt.Errorf("the bench's own permits: %w", err)
	}
	watch, err := b.watchGrants(ctx, name)
	if err != nil {
		stopWorkers(ws)
		return fmt.Errorf("watching the grants: %w", err)
	}
	defer watch.close()
	before := b.costSnap(ctx)
	start := launch(ws)
	here := contendHere(ctx, contention{acquire: semAcquire(s, b.cfg.ttl), ttl: b.cfg.ttl, hold: b.cfg.hold},
		n*btoi(p == 0), func(i int) time.Time { return start.Add(time.Duration(i) * b.stagger()) })
	b.settle(start, n)
	if err := watch.queued(ctx); err != nil {
		stopWorkers(ws)
		return fmt.Errorf("reading the queue: %w", err)
	}
	t0 := time.Now()
	holders, err := own.release(ctx)
	if err != nil {
		stopWorkers(ws)
		return fmt.Errorf("the bench's release: %w", err)
	}
	seen := here()
	sentHere := b.target.sent.since(before.sent) // this process's contenders', when it runs them
	theirs, sent, err := b.reports(ws)
	if err != nil {
		return err
	}
	c := costOf(before, b.costSnap(ctx), n, sent)
	if err := watch.drain(ctx); err != nil {
		return fmt.Errorf("reading the grants: %w", err)
	}
	if p == 0 {
		sent = sentHere
	}
	res.add(append(seen, theirs...), holders, t0, c, sent)
	res.outOfOrder += watch.outOfOrder()
	res.unannounced += n - watch.announced()
	return nil
}

// benchPermits are the permits the bench holds while the contenders
// arrive, from held on.
type benchPermits struct {
	held    time.Time
	permits []*efficiency.Lock
}

// takePermits takes every permit of s, for ttl.
func takePermits(ctx context.Context, s *efficiency.Semaphore, ttl time.Duration) (*benchPermits, error) {
	own := &benchPermits{held: time.Now()}
	for range semLimit {
		permit, err := s.TryAcquire(ctx, ttl)
		if err != nil {
			return nil, err
		}
		own.permits = append(own.permits, permit)
	}
	return own, nil
}

// release releases the permits, and returns them as holders, for
// holdersAtOnce.
func (own *benchPermits) release(ctx context.Context) ([]procContender, error) {
	holders := make([]procContender, len(own.permits))
	for i, permit := range own.permits {
		holders[i] = procContender{Granted: own.held.UnixNano(), Releasing: time.Now().UnixNano()}
		if err := permit.Release(ctx); err != nil {
			return nil, err
		}
	}
	return holders, nil
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
	permits := scripts.PermitsKey(scripts.DefaultPrefix, name)
	c, ok := b.client.(*redis.Client)
	if !ok {
		w.sharded, w.sync = true, permits+":grants:bench"
		return w, nil
	}
	w.sync = scripts.GrantChannel(scripts.DefaultPrefix, "bench-"+b.id)
	w.ps = c.PSubscribe(ctx, scripts.GrantChannel(scripts.DefaultPrefix, "*"))
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
	queue := scripts.QueueKey(scripts.PermitsKey(scripts.DefaultPrefix, w.name))
	entries, err := w.b.client.ZRange(ctx, queue, 0, -1).Result()
	if err != nil {
		return err
	}
	channels := []string{w.sync}
	for _, e := range entries {
		if id, channel, ok := scripts.EntryTicket(e); ok {
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
		if g, ok := scripts.ParseMessage(m.Payload); ok {
			id := g.ID
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

// add pools one run: its contenders, the bench's own permits, the first
// release at t0, its server cost and the commands its contenders sent.
func (r *semResult) add(cs, own []procContender, t0 time.Time, c cost, sent map[string]int64) {
	ok := r.pool.add(cs, t0, c)
	most, beyond := holdersAtOnce(append(own, ok...))
	r.maxHolders = max(r.maxHolders, most)
	r.overlaps += beyond
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
	out := r.pool.row(time.Duration(r.perRun()) * r.holds.mean() / semLimit)
	out.Scenario, out.Lib, out.Procs, out.Contenders = "semaphore", "efficiency", set[0], set[1]
	out.Config = fmt.Sprintf("leasekit efficiency: one efficiency.New(client) per process, Semaphore(name, %d); Acquire(ctx, %v), hold %v, Release", semLimit, b.cfg.ttl, b.cfg.hold)
	out.Limit, out.MaxHolders, out.OutOfOrder = semLimit, r.maxHolders, &r.outOfOrder
	out.TripsPerOp = float64(r.sent) / float64(max(r.acquired+r.failures, 1))
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
	return []column{libColumn,
		{"P", func(r row) string {
			if r.Procs == 0 {
				return "this"
			}
			return fmt.Sprint(r.Procs)
		}},
		contendersCol, {"N", func(r row) string { return fmt.Sprint(r.Limit) }},
		acquiredCol, makespanCol, idealCol, timesColumn("÷ ideal"),
		{"max holders", func(r row) string { return fmt.Sprint(r.MaxHolders) }},
		{"out of order", func(r row) string { return fmt.Sprint(*r.OutOfOrder) }},
		{"wait p50", p50Column.value}, {"wait p99", p99Column.value},
		{"cmds/acq", func(r row) string { return fmt.Sprintf("%.2f", r.TripsPerOp) }},
		srvUsecAcq, srvCallsAcq, failuresCol}
}

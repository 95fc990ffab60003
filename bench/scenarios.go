package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// scenario is one measurement, run over every subject in turn.
type scenario struct {
	name string
	run  func(b *bench, ctx context.Context) []row
}

// bench is one run: the server, the libraries opened on it, and the reference
// that scenarios report against.
type bench struct {
	cfg    config
	target *target
	client redis.UniversalClient // target's
	// id names this run in every key it makes, so that cleanup finds them.
	id   string
	libs []openLib
	prog *progress
	// ping and idlePing are the p50 of one PING round trip, busy and from
	// idle, measured before any scenario.
	ping, idlePing time.Duration
	// publish is the p50 of a PUBLISH from idle until a subscriber in this
	// process has it: the floor of a handoff over pub/sub (0 if unmeasured).
	publish time.Duration
	// etcdPut is the p50 of a plain etcd Put, one etcd round trip (0
	// without -etcd).
	etcdPut time.Duration
	// notes are warnings about the measurements, printed after the tables.
	notes []string
	// spin keeps idle vCPUs awake for the latency scenarios.
	spin *spinners
}

type openLib struct {
	name string
	lib  library
	l    locker
}

// note adds a warning about the measurements, once.
func (b *bench) note(s string) {
	if !slices.Contains(b.notes, s) {
		b.notes = append(b.notes, s)
	}
}

// trips is how many round trips the bench's clients have made so far.
func (b *bench) trips() int64 { return b.target.sent.trips.Load() }

// subject is something a scenario times: a library's acquire + release, or a
// reference made of plain commands.
type subject struct {
	name string
	ref  bool
	op   func(ctx context.Context, key string) error
	// idle is how long to sleep, untimed, before each op.
	idle time.Duration
	// tokens checks the fencing tokens of a library's grants; nil for a
	// reference.
	tokens *tokenCheck
}

// keysParallelWorkers is the concurrency of keys-parallel.
const keysParallelWorkers = 64

// keysParallelCell is how long each subject of keys-parallel runs in a round
// before the next subject's turn (keysParallelQuickCell with -quick).
const keysParallelCell, keysParallelQuickCell = 50 * time.Millisecond, 20 * time.Millisecond

// scenarioNames are the names -scenarios accepts; "convoy" stands for a
// convoy of each -contenders count.
var scenarioNames = []string{"ping", "uncontended", "convoy", "convoy-procs", "keys-parallel"}

// extraScenarios are the scenarios that files of their own register
// (semaphore.go), run after the others.
var extraScenarios []scenario

// selectScenarios returns the scenarios names asks for, in run order.
func selectScenarios(names []string, contenders []int) ([]scenario, error) {
	var out []scenario
	want := func(name string) bool {
		_, err := strconv.Atoi(strings.TrimPrefix(name, "convoy-"))
		return slices.Contains(names, name) || strings.HasPrefix(name, "convoy-") && err == nil && slices.Contains(names, "convoy")
	}
	all := []scenario{
		{name: "ping", run: (*bench).measurePing},
		{name: "uncontended", run: (*bench).uncontended},
	}
	for _, n := range contenders {
		all = append(all, scenario{name: "convoy-" + strconv.Itoa(n), run: func(b *bench, ctx context.Context) []row { return b.convoy(ctx, n) }})
	}
	all = append(all, scenario{name: "convoy-procs", run: (*bench).convoyProcs},
		scenario{name: "keys-parallel", run: (*bench).keysParallel}, scenario{name: "election", run: (*bench).election})
	all = append(all, extraScenarios...)
	for _, s := range all {
		if want(s.name) {
			out = append(out, s)
		}
	}
	for _, name := range names {
		if !slices.ContainsFunc(all, func(s scenario) bool { return s.name == name }) && !slices.Contains(scenarioNames, name) {
			return nil, fmt.Errorf("unknown scenario %q (want %s, or convoy-N for N in -contenders)", name, strings.Join(scenarioNames, ","))
		}
	}
	return out, nil
}

// key is the name of the lock (or key) of subject in scenario: it holds the
// run's id, and so does every key a library derives from it.
func (b *bench) key(scenario, subject string) string {
	return "bench:" + b.id + ":" + scenario + ":" + subject
}

// lockOp is an acquire and a release of l, whose grant's token, if it has
// one, tokens checks.
func lockOp(l locker, tokens *tokenCheck) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		h, err := l.acquire(ctx, key)
		if err != nil {
			return err
		}
		tokens.see(key, h)
		return h.Release(ctx)
	}
}

// libsIn are the open libraries that run in the scenario called name.
func (b *bench) libsIn(name string) []openLib {
	var out []openLib
	for _, lib := range b.libs {
		if lib.lib.runsIn(name) {
			out = append(out, lib)
		}
	}
	return out
}

// lockSubjects are the libraries of scenario as subjects, after the given
// references.
func (b *bench) lockSubjects(scenario string, refs ...subject) []subject {
	out := refs
	for _, lib := range b.libsIn(scenario) {
		tokens := &tokenCheck{}
		out = append(out, subject{name: lib.name, op: lockOp(lib.l, tokens), tokens: tokens})
	}
	return out
}

// fenced is a held lock with a fencing token.
type fenced interface{ Token() uint64 }

// tokenCheck checks that each grant's fencing token is above the token of
// the grant before it of the same lock, as a fence needs: grants of one
// lock are made one at a time, and seen, by lockOp and contend, while held.
// Its methods are safe for concurrent use, and for a nil tokenCheck, which
// checks nothing.
type tokenCheck struct {
	mu          sync.Mutex
	last        map[string]uint64 // by lock
	seen        int               // grants with a token
	regressions int               // tokens not above the one before
}

// see checks the token of h, a grant of the lock called key, if it has
// one.
func (c *tokenCheck) see(key string, h held) {
	f, ok := h.(fenced)
	if c == nil || !ok {
		return
	}
	token := f.Token()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = make(map[string]uint64)
	}
	if last, ok := c.last[key]; ok && token <= last {
		c.regressions++
	}
	c.last[key] = token
	c.seen++
}

// fill puts the check's counts in r, and a note in b if a token did not
// grow.
func (c *tokenCheck) fill(r *row, b *bench) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Tokens, r.TokenRegressions = c.seen, c.regressions
	if c.regressions > 0 {
		b.note(fmt.Sprintf("note: %s, %s: %d of %d grants had a fencing token not above the previous grant's of the same lock",
			r.Scenario, r.Lib, c.regressions, c.seen))
	}
}

// pingSubject times n PINGs in a row.
func (b *bench) pingSubject(name string, n int) subject {
	return subject{name: name, ref: true, op: func(ctx context.Context, _ string) error {
		for range n {
			if err := b.client.Ping(ctx).Err(); err != nil {
				return err
			}
		}
		return nil
	}}
}

// measurePing sets the references every other scenario reports against: a
// PING on a busy connection, and a PING after the client and server have been
// idle for -hold, as the release at the end of a convoy holder's critical
// section is. On a virtual machine the second can cost several times the
// first: idle CPUs take a while to wake. A third reference, a PUBLISH after
// the same idle time until a subscriber goroutine of the same process has
// received it, is the floor of any handoff announced over pub/sub.
func (b *bench) measurePing(ctx context.Context) []row {
	idle := b.pingSubject("PING after idle", 1)
	idle.idle = max(b.cfg.hold, time.Microsecond)
	subjects := []subject{b.pingSubject("PING", 1), idle}
	published, stop, err := b.publishSubject(ctx, idle.idle)
	if err == nil {
		defer stop()
		subjects = append(subjects, published)
	} else {
		b.note("note: the PUBLISH reference could not subscribe: " + err.Error())
	}
	if b.target.etcd != nil {
		subjects = append(subjects, b.etcdPutSubject())
	}
	rows := b.sequential(ctx, "ping", subjects)
	b.ping, b.idlePing = time.Duration(rows[0].P50), time.Duration(rows[1].P50)
	rows[0].Config = "go-redis Ping: one round trip, the physical floor of any Redis command"
	rows[1].Config = fmt.Sprintf("go-redis Ping after sleeping %v (untimed): a round trip from idle", idle.idle)
	for i := range rows {
		switch rows[i].Lib {
		case published.name:
			b.publish = time.Duration(rows[i].P50)
			rows[i].Config = fmt.Sprintf("go-redis Publish after sleeping %v (untimed), until a PubSub.Receive goroutine has handed the message on: the floor of a handoff over pub/sub", idle.idle)
		case etcdPutName:
			b.etcdPut = time.Duration(rows[i].P50)
			rows[i].Config = "etcd clientv3 Put of one key: one etcd round trip, a write that Raft commits on a quorum of the members before it answers, the floor of an etcd token's Txn or a Mutex's Lock"
		}
		rows[i].Ratio, rows[i].RatioTo = ratio(rows[i].P50, rows[0].P50), "PING p50"
	}
	return rows
}

// publishSubject times a PUBLISH, after idle, until a goroutine reading a
// subscription of the same client has received the message and passed it on
// over a Go channel, as leasekit's grant reader does. stop ends the
// subscription.
func (b *bench) publishSubject(ctx context.Context, idle time.Duration) (subject, func(), error) {
	channel := b.key("ping", "publish")
	ps := b.client.Subscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return subject{}, nil, err
	}
	heard := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := ps.Receive(context.Background()); err != nil {
				return
			}
			select {
			case heard <- struct{}{}:
			default:
			}
		}
	}()
	s := subject{name: "PUBLISH after idle", ref: true, idle: idle, op: func(ctx context.Context, _ string) error {
		if err := b.client.Publish(ctx, channel, "").Err(); err != nil {
			return err
		}
		select {
		case <-heard:
			return nil
		case <-time.After(time.Second):
			return fmt.Errorf("no message within a second")
		}
	}}
	stop := func() {
		_ = ps.Close()
		<-done
	}
	return s, stop, nil
}

func (b *bench) uncontended(ctx context.Context) []row {
	refs := []subject{b.pingSubject("2×PING", 2)}
	if b.target.etcd != nil {
		// etcd's latency drifts with its disk's: this scenario's own etcd
		// round trip, interleaved with the subjects, is what it reads
		// them against.
		refs = append(refs, b.etcdPutSubject())
	}
	rows := b.sequential(ctx, "uncontended", b.lockSubjects("uncontended", refs...))
	rows[0].Config = "two go-redis Pings in a row: the floor of an acquire + release"
	var put int64
	if b.target.etcd != nil {
		rows[1].Config = "etcd clientv3 Put of one key, as in ping, interleaved with the subjects: one etcd round trip, the floor of an etcd token's Txn; etcd-mutex's Lock and Unlock are two such writes"
		put = rows[1].P50
	}
	for i := range rows {
		rows[i].Ratio, rows[i].RatioTo = ratio(rows[i].P50, rows[0].P50), "2×PING p50"
		rows[i].P50EtcdPuts = ratio(rows[i].P50, put)
	}
	switch two := time.Duration(rows[0].P50); {
	case two <= 4*b.ping:
	case b.idlePing > 0 && two <= 2*b.idlePing:
		// Slower than busy round trips, no slower than two from idle: the
		// machine's CPUs slept between the round trips here (a VM's idle
		// wake-up), and every subject paid the same.
		b.note(fmt.Sprintf("note: two PINGs took %v here, against %v for one busy and %v for one from idle in the ping scenario: these round trips ran at idle speed, so the ratios weigh each library's own cost against slow wake-ups",
			fmtDur(two), fmtDur(b.ping), fmtDur(b.idlePing)))
	default:
		b.note(fmt.Sprintf("note: two PINGs took %v here against %v for one in the ping scenario, slower even than two from idle: the machine was busy meanwhile, and these latencies are mostly noise; run again",
			fmtDur(two), fmtDur(b.ping)))
	}
	return rows
}

// chunk is how many ops of one subject run before the next subject's turn.
// Small, so that a burst of noise from another process lands on every subject
// alike rather than on whichever one's turn it was.
const chunk = 10

// seqResult accumulates one subject's samples over the rounds.
type seqResult struct {
	lat       samples
	failures  int
	trips     int64
	etcdTrips int64
	ops       int
	elapsed   time.Duration
}

// sequential times each subject's op, one at a time on one goroutine,
// interleaved a chunk at a time, after the same warm-up for all; then counts
// each one's allocations in an untimed pass.
func (b *bench) sequential(ctx context.Context, scenario string, subjects []subject) []row {
	rounds := max(b.cfg.n/chunk, 1)
	res := make([]seqResult, len(subjects))
	for i, s := range subjects {
		b.prog.say(scenario, "warm-up, "+s.name)
		b.timeSequential(ctx, &seqResult{}, s, b.key(scenario, s.name), min(max(b.cfg.n/10, 5), 100))
		res[i].lat = make(samples, 0, rounds*chunk)
	}
	for r := range rounds {
		if r%50 == 0 {
			b.prog.say(scenario, fmt.Sprintf("round %d/%d", r+1, rounds))
		}
		for i, s := range subjects {
			b.timeSequential(ctx, &res[i], s, b.key(scenario, s.name), chunk)
		}
	}
	rows := make([]row, len(subjects))
	if scenario != "ping" {
		// CPU time is counted without spinners: on a VM whose vCPUs they
		// keep busy, this process's CPU time swells with the host's steal.
		b.spin.stop()
	}
	for i, s := range subjects {
		b.prog.say(scenario, "counting costs, "+s.name)
		allocs, c := b.costPass(ctx, s, b.key(scenario, s.name))
		r := &res[i]
		rows[i] = row{
			Scenario: scenario, Lib: s.name, Reference: s.ref,
			N: r.ops, P50: int64(r.lat.p50()), P99: int64(r.lat.p99()),
			OpsPerS:        perSecond(r.ops, r.elapsed),
			AllocsPerOp:    &allocs,
			TripsPerOp:     float64(r.trips) / float64(r.ops),
			EtcdTripsPerOp: float64(r.etcdTrips) / float64(r.ops),
			Failures:       r.failures,
			ClientCPUPerOp: &c.clientCPU, ServerUsecPerOp: c.serverUsec, ServerCallsPerOp: c.serverCalls,
		}
		s.tokens.fill(&rows[i], b)
	}
	return rows
}

func (b *bench) timeSequential(ctx context.Context, res *seqResult, s subject, key string, n int) {
	trips, etcdTrips := b.trips(), b.etcdTrips()
	for range n {
		if s.idle > 0 {
			time.Sleep(s.idle)
		}
		t := time.Now()
		err := s.op(ctx, key)
		d := time.Since(t)
		res.elapsed += d
		if err != nil {
			res.failures++
			continue
		}
		res.lat = append(res.lat, d)
	}
	res.trips += b.trips() - trips
	res.etcdTrips += b.etcdTrips() - etcdTrips
	res.ops += n
}

// costPass measures what s's op costs, on average: every allocation the
// process makes, the process's CPU time, and the server's time and commands.
// It is a pass of its own because reading the counts stops the world (and
// INFO is a command of its own), which the timed rounds, a chunk at a time,
// would feel.
func (b *bench) costPass(ctx context.Context, s subject, key string) (allocs float64, c cost) {
	n := min(b.cfg.n, 1000)
	if s.idle > 0 {
		n = min(n, 50)
	}
	var before, after runtime.MemStats
	runtime.GC() // so that no earlier scenario's garbage is collected on this pass's CPU
	snap := b.costSnap(ctx)
	runtime.ReadMemStats(&before)
	for range n {
		if s.idle > 0 {
			time.Sleep(s.idle)
		}
		_ = s.op(ctx, key)
	}
	runtime.ReadMemStats(&after)
	c = costOf(snap, b.costSnap(ctx), n, nil)
	if s.idle > 0 {
		c.clientCPU = 0 // the idle sleeps are not the op's
	}
	return float64(after.Mallocs-before.Mallocs) / float64(n), c
}

// convoyReps is how many convoys of each library are run and pooled.
func (b *bench) convoyReps() int {
	if b.cfg.quick {
		return 1
	}
	return min(max(b.cfg.n/600, 1), 10)
}

// convoyResult pools one library's convoys.
type convoyResult struct {
	makespans samples
	holds     samples
	handoffs  samples
	waits     samples
	failures  int
	overlaps  int
	trips     int64
	etcdTrips int64
	// etcdTook are the durations of the etcd round trips the convoys made.
	etcdTook samples
	tokens   tokenCheck
}

// convoy: n contenders start together and each takes the same key once, holds
// it for -hold and releases it.
func (b *bench) convoy(ctx context.Context, n int) []row {
	scenario := "convoy-" + strconv.Itoa(n)
	reps := b.convoyReps()
	libs := b.libsIn(scenario)
	res := make([]convoyResult, len(libs))
	for _, lib := range libs {
		// A convoy of two, untimed: it loads the scripts a waiter runs and
		// opens leasekit's grant subscription, which an uncontended acquire
		// would not, so that the first timed convoy does not pay for them.
		// A library that opens a session per contender (etcd-mutex) opens
		// the convoy's now.
		b.prog.say(scenario, "warm-up, "+lib.name)
		if p, ok := lib.l.(preparer); ok {
			if err := p.prepare(n); err != nil {
				b.note(fmt.Sprintf("note: %s, %s: getting ready: %v", scenario, lib.name, err))
			}
		}
		b.runConvoy(ctx, &convoyResult{}, lib.l, b.key(scenario, lib.name), 2)
	}
	for r := range reps {
		for i, lib := range libs {
			b.prog.say(scenario, fmt.Sprintf("run %d/%d, %s", r+1, reps, lib.name))
			trips, etcdTrips := b.trips(), b.etcdTrips()
			_, mark := b.etcdTook(0)
			b.runConvoy(ctx, &res[i], lib.l, b.key(scenario, lib.name), n)
			res[i].trips += b.trips() - trips
			res[i].etcdTrips += b.etcdTrips() - etcdTrips
			took, _ := b.etcdTook(mark)
			res[i].etcdTook = append(res[i].etcdTook, took...)
		}
	}
	rows := make([]row, len(libs))
	for i, lib := range libs {
		rows[i] = res[i].row(scenario, lib.name, n*reps, n, b)
		res[i].tokens.fill(&rows[i], b)
	}
	return rows
}

// contender is what one convoy goroutine saw.
type contender struct {
	err                          error
	granted, releasing, released time.Time
}

func (b *bench) runConvoy(ctx context.Context, res *convoyResult, l locker, key string, n int) {
	seen := make([]contender, n)
	var ready, done sync.WaitGroup
	var inside, overlaps atomic.Int32
	start := make(chan struct{})
	ready.Add(n)
	for i := range seen {
		done.Go(func() {
			ready.Done()
			<-start
			b.contend(ctx, &seen[i], l, key, &inside, &overlaps, &res.tokens)
		})
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()

	var last time.Time
	var ok []contender
	for _, c := range seen {
		if c.err != nil {
			res.failures++
			continue
		}
		ok = append(ok, c)
		res.waits = append(res.waits, c.granted.Sub(t0))
		res.holds = append(res.holds, c.releasing.Sub(c.granted))
		if c.released.After(last) {
			last = c.released
		}
	}
	res.overlaps += int(overlaps.Load())
	slices.SortFunc(ok, func(a, b contender) int { return a.granted.Compare(b.granted) })
	for i := 1; i < len(ok); i++ {
		res.handoffs = append(res.handoffs, ok[i].granted.Sub(ok[i-1].releasing))
	}
	if len(ok) > 0 {
		res.makespans = append(res.makespans, last.Sub(t0))
	}
}

// contend is one convoy goroutine: acquire (giving up after one ttl), hold,
// release. A release error counts as a failure too. tokens checks the
// grant's token while it is held.
func (b *bench) contend(ctx context.Context, c *contender, l locker, key string, inside, overlaps *atomic.Int32, tokens *tokenCheck) {
	actx, cancel := context.WithTimeout(ctx, b.cfg.ttl)
	defer cancel()
	h, err := l.acquire(actx, key)
	c.granted = time.Now()
	if err != nil {
		c.err = err
		return
	}
	if inside.Add(1) > 1 {
		overlaps.Add(1)
	}
	tokens.see(key, h)
	time.Sleep(b.cfg.hold)
	inside.Add(-1)
	c.releasing = time.Now()
	c.err = h.Release(ctx)
	c.released = time.Now()
}

func (r *convoyResult) row(scenario, lib string, acquisitions, n int, b *bench) row {
	ideal := time.Duration(n) * (r.holds.mean() + b.ping)
	makespan := r.makespans.p50()
	return row{
		Scenario: scenario, Lib: lib, N: acquisitions,
		P50: int64(r.waits.p50()), P99: int64(r.waits.p99()), WaitMax: int64(r.waits.max()),
		OpsPerS:    perSecond(n, makespan),
		Ratio:      ratio(makespan, ideal),
		RatioTo:    "ideal makespan",
		IdealNs:    int64(ideal),
		Makespan:   int64(makespan),
		HoldNs:     int64(r.holds.mean()),
		HandoffP50: int64(r.handoffs.p50()), HandoffP99: int64(r.handoffs.p99()),
		HandoffPings:     ratio(r.handoffs.p50(), b.ping),
		HandoffIdlePings: ratio(r.handoffs.p50(), b.idlePing),
		HandoffPublishes: ratio(r.handoffs.p50(), b.publish),
		HandoffEtcdPuts:  ratio(r.handoffs.p50(), b.etcdPut),
		EtcdTripP50:      int64(r.etcdTook.p50()),
		TripsPerOp:       float64(r.trips) / float64(acquisitions),
		EtcdTripsPerOp:   float64(r.etcdTrips) / float64(acquisitions),
		Failures:         r.failures,
		Overlaps:         r.overlaps,
	}
}

// keysParallel: 64 goroutines on distinct keys, acquire + release throughput
// against plain SETs with the same client and concurrency.
func (b *bench) keysParallel(ctx context.Context) []row {
	const scenario = "keys-parallel"
	subjects := b.lockSubjects(scenario, b.setSubject())
	rounds, cell := 20, keysParallelCell
	if b.cfg.quick {
		rounds, cell = 1, keysParallelQuickCell
	}
	res := make([]seqResult, len(subjects))
	for _, s := range subjects {
		b.prog.say(scenario, "warm-up, "+s.name)
		b.timeParallel(ctx, &seqResult{}, s, scenario, 0)
	}
	for r := range rounds {
		for i, s := range subjects {
			b.prog.say(scenario, fmt.Sprintf("round %d/%d, %s", r+1, rounds, s.name))
			b.timeParallel(ctx, &res[i], s, scenario, cell)
		}
	}
	rows := make([]row, len(subjects))
	for i, s := range subjects {
		b.prog.say(scenario, "counting costs, "+s.name)
		var pass seqResult
		runtime.GC()
		before := b.costSnap(ctx)
		b.timeParallel(ctx, &pass, s, scenario, cell)
		c := costOf(before, b.costSnap(ctx), pass.ops, nil)
		r := &res[i]
		rows[i] = row{
			Scenario: scenario, Lib: s.name, Reference: s.ref,
			N: r.ops, P50: int64(r.lat.p50()), P99: int64(r.lat.p99()),
			OpsPerS:        perSecond(r.ops, r.elapsed),
			TripsPerOp:     float64(r.trips) / float64(max(r.ops, 1)),
			Failures:       r.failures,
			ClientCPUPerOp: &c.clientCPU, ServerUsecPerOp: c.serverUsec, ServerCallsPerOp: c.serverCalls,
		}
		rows[i].Ratio, rows[i].RatioTo = ratio(rows[i].OpsPerS, rows[0].OpsPerS), "SET ops/s"
		s.tokens.fill(&rows[i], b)
	}
	return rows
}

// setSubject is keys-parallel's reference: a plain SET, as redis-benchmark
// runs.
func (b *bench) setSubject() subject {
	return subject{name: "SET", ref: true, op: func(ctx context.Context, key string) error {
		return b.client.Set(ctx, key, "1", 0).Err()
	}}
}

// timeParallel runs s on keysParallelWorkers goroutines, each on its own key,
// for d (each runs one op when d is 0: the warm-up); an op that takes longer
// than the ttl gives up, and counts as a failure.
func (b *bench) timeParallel(ctx context.Context, res *seqResult, s subject, scenario string, d time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	trips := b.trips()
	start := time.Now()
	deadline := start.Add(d)
	for w := range keysParallelWorkers {
		wg.Go(func() {
			key := b.key(scenario, s.name+":"+strconv.Itoa(w))
			var lat samples
			failures := 0
			for first := true; first || time.Now().Before(deadline); first = false {
				t := time.Now()
				// As a convoy's, an op gives up after one ttl: a library
				// that hangs a waiter costs a failure, not the run.
				octx, cancel := context.WithTimeout(ctx, b.cfg.ttl)
				err := s.op(octx, key)
				cancel()
				if err != nil {
					failures++
					continue
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.failures += failures
			res.ops += len(lat) + failures
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed += time.Since(start)
	res.trips += b.trips() - trips
}

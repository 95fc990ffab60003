package main

import (
	"bufio"
	"cmp"
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
	"sync/atomic"
	"syscall"
	"time"
)

// roleEnv makes the bench's binary (or its test binary) one of the
// processes a run starts: a convoy-procs worker or a spinner.
const roleEnv = "LEASEKIT_BENCH_ROLE"

// extraRoles are the worker roles that files of their own register
// (semaphore.go): each runs with the process's stdin and stdout.
var extraRoles = map[string]func(in io.Reader, out io.Writer) error{}

// workerEnv carries a worker's workerConfig, as JSON.
const workerEnv = "LEASEKIT_BENCH_WORKER"

// runRole runs the process as role and returns its exit status.
func runRole(role string) int {
	var err error
	switch role {
	case "worker":
		err = runWorker(os.Stdin, os.Stdout)
	case "spinner":
		spin(os.Stdin)
	case "candidate":
		err = runCandidate(os.Stdin, os.Stdout)
	default:
		if run, ok := extraRoles[role]; ok {
			err = run(os.Stdin, os.Stdout)
		} else {
			err = fmt.Errorf("unknown %s %q", roleEnv, role)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench worker:", err)
		return 1
	}
	return 0
}

// convoy-procs: P worker processes, each with its own client and its own
// instance of the library, C contenders each, all on one key. To give
// "arrival order" a meaning, the lock is held first by the parent, and the
// contenders arrive one at a time, procStagger apart (more than a waiter's
// probe and queueing round trips, and the scheduling noise of a 2-vCPU
// machine; the tests, under -race, space them wider), interleaved across the
// processes (contender c of worker p is arrival c·P + p); once all have
// arrived the parent releases it, and the convoy drains. The makespan runs
// from that release to the last contender's release.
const (
	procStagger = 2 * time.Millisecond
	procSettle  = 20 * time.Millisecond // after the last arrival, before the release
	procStartIn = 20 * time.Millisecond // from "go" to the first arrival
)

// stagger is the time between two arrivals in convoy-procs.
func (b *bench) stagger() time.Duration {
	if b.cfg.stagger > 0 {
		return b.cfg.stagger
	}
	return procStagger
}

// workerConfig is what a worker is told.
type workerConfig struct {
	Lib     string        `json:"lib"`
	URL     string        `json:"url,omitempty"`
	Addrs   []string      `json:"addrs"`
	Cluster bool          `json:"cluster,omitempty"`
	NoTrack bool          `json:"no_tracking,omitempty"` // miniredis: no client-side caching
	TTL     time.Duration `json:"ttl"`
	Hold    time.Duration `json:"hold"`
	Key     string        `json:"key"`
	Index   int           `json:"index"`
	Procs   int           `json:"procs"`
	PerProc int           `json:"per_proc"`
	Stagger time.Duration `json:"stagger"`
	// Order makes each contender record the first command of its
	// acquisition, for the ordering pass.
	Order bool `json:"order,omitempty"`
	// Cold makes the worker skip its warm-up: its first contender's
	// acquisition is the process's first, as a fresh process's (a cron
	// job's) is.
	Cold bool `json:"cold,omitempty"`
	// Phases makes the first contender stamp the phases of its acquisition
	// (phases.go).
	Phases bool `json:"phases,omitempty"`
}

// procContender is what one contender saw, in Unix nanoseconds: every process
// reads the same wall clock.
type procContender struct {
	Arrival   int64  `json:"arrival"`
	Granted   int64  `json:"granted"`
	Releasing int64  `json:"releasing"`
	Released  int64  `json:"released"`
	Err       string `json:"err,omitempty"`
	// First is the first command of the acquisition, in an ordering pass:
	// its arguments as bytes, since JSON strings cannot carry every byte.
	First [][]byte `json:"first,omitempty"`
	// Phases are the first contender's, in a worker that stamps them.
	Phases *firstAcquire `json:"phases,omitempty"`
}

// workerReport is a worker's last line: its contenders, and the commands its
// clients sent.
type workerReport struct {
	Contenders []procContender  `json:"contenders"`
	Sent       map[string]int64 `json:"sent"`
}

// runWorker is a convoy-procs worker: it opens its library, warms up unless
// it is a cold one, says it is ready, waits for "go <unix ns>", runs its
// contenders and reports.
func runWorker(in io.Reader, out io.Writer) error {
	var wc workerConfig
	if err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &wc); err != nil {
		return fmt.Errorf("%s: %w", workerEnv, err)
	}
	t, err := dial(config{url: wc.URL, addr: wc.Addrs[0], cluster: map[bool][]string{true: wc.Addrs}[wc.Cluster]})
	if err != nil {
		return err
	}
	defer t.close()
	t.noTracking = wc.NoTrack
	t.sent.firsts = wc.Order
	var phases *phaseHook
	if wc.Phases {
		phases = &phaseHook{}
		t.client.AddHook(phases)
	}
	lib, ok := libraryNamed(wc.Lib)
	if !ok {
		return fmt.Errorf("unknown library %q", wc.Lib)
	}
	l, err := lib.open(t, t.client, wc.TTL)
	if err != nil {
		return err
	}
	defer l.close()
	ctx := context.Background()
	if !wc.Cold {
		// Best effort, and bounded: a peer's waiter that misses its wake-up
		// (see bench/README.md) must not keep the convoy from starting; a
		// library that cannot acquire at all fails in the convoy.
		warmUp(ctx, l, wc.Key)
	}
	fmt.Fprintln(out, `{"ready":true}`)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	start, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "go ")), 10, 64)
	if err != nil {
		return fmt.Errorf("go line %q: %w", line, err)
	}
	seen := make([]procContender, wc.PerProc)
	before := t.sent.counts()
	var wg sync.WaitGroup
	for c := range seen {
		arrival := time.Unix(0, start).Add(time.Duration(c*wc.Procs+wc.Index) * wc.Stagger)
		wg.Go(func() { seen[c] = contendAt(ctx, l, wc, arrival, map[bool]*phaseHook{true: phases}[c == 0]) })
	}
	wg.Wait()
	sent := t.sent.counts()
	for name, n := range before {
		sent[name] -= n
	}
	return json.NewEncoder(out).Encode(workerReport{Contenders: seen, Sent: sent})
}

// warmUp acquires key, and while it holds it a second contender asks for it
// and waits, so that connections, loaded scripts and the waiting path (a
// subscription in the node that owns the key) are ready before the timed
// convoy: otherwise the first waiter of each process pays for a dial that
// the others do not, and can queue behind a waiter that arrived after it.
func warmUp(ctx context.Context, l locker, key string) {
	ctx, cancel := context.WithTimeout(ctx, warmUpLimit)
	defer cancel()
	h, err := l.acquire(ctx, key)
	if err != nil {
		return
	}
	second := make(chan struct{})
	go func() {
		defer close(second)
		if h, err := l.acquire(ctx, key); err == nil {
			_ = h.Release(ctx)
		}
	}()
	time.Sleep(warmUpHold)
	_ = h.Release(ctx)
	<-second
}

const (
	// warmUpHold is how long warmUp holds the key: long enough for the
	// second contender to find it held.
	warmUpHold = 20 * time.Millisecond
	// warmUpLimit bounds a worker's warm-up.
	warmUpLimit = 5 * time.Second
)

// contendAt arrives at arrival, acquires (giving up after one ttl), holds and
// releases; with phases (not nil), it stamps the phases of its acquisition.
func contendAt(ctx context.Context, l locker, wc workerConfig, arrival time.Time, phases *phaseHook) (c procContender) {
	time.Sleep(time.Until(arrival))
	actx := ctx
	var log *phaseLog
	if phases != nil {
		actx, log = withPhaseLog(ctx)
	}
	if wc.Order {
		var first *firstCommand
		actx, first = withFirstCommand(actx)
		defer func() {
			for _, a := range first.get() {
				c.First = append(c.First, []byte(a))
			}
		}()
	}
	c.Arrival = time.Now().UnixNano()
	actx, cancel := context.WithTimeout(actx, wc.TTL)
	defer cancel()
	h, err := l.acquire(actx, wc.Key)
	c.Granted = time.Now().UnixNano()
	if err != nil {
		c.Err = err.Error()
		return c
	}
	if phases != nil {
		f := phases.phases(log, time.Unix(0, c.Arrival))
		c.Phases = &f
	}
	time.Sleep(wc.Hold)
	c.Releasing = time.Now().UnixNano()
	if err := h.Release(ctx); err != nil {
		c.Err = "release: " + err.Error()
	}
	c.Released = time.Now().UnixNano()
	return c
}

// worker is a running worker process, seen from the parent.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr strings.Builder
}

// startWorkers starts n workers for lib on key and waits until each is ready;
// with order, their contenders record their first commands; cold ones skip
// their warm-up.
func (b *bench) startWorkers(ctx context.Context, lib string, key string, n int, order, cold bool) ([]*worker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ws []*worker
	for i := range n {
		wc, _ := json.Marshal(workerConfig{
			Lib: lib, URL: b.cfg.url, Addrs: b.target.addrs, Cluster: b.target.cluster, NoTrack: b.target.noTracking,
			TTL: b.cfg.ttl, Hold: b.cfg.hold, Key: key, Index: i, Procs: n, PerProc: b.cfg.perProc,
			Stagger: b.stagger(), Order: order, Cold: cold, Phases: !order && b.libQueues(lib),
		})
		w := &worker{cmd: exec.CommandContext(ctx, self)}
		w.cmd.Env = append(os.Environ(), roleEnv+"=worker", workerEnv+"="+string(wc))
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
			return nil, fmt.Errorf("worker did not get ready (%v): %s", err, strings.TrimSpace(w.stderr.String()))
		}
	}
	return ws, nil
}

func stopWorkers(ws []*worker) {
	for _, w := range ws {
		_ = w.in.Close()
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
	}
}

// report reads a worker's report and waits for it to exit.
func (w *worker) report() (workerReport, error) {
	var r workerReport
	line, err := w.out.ReadString('\n')
	if err == nil {
		err = json.Unmarshal([]byte(line), &r)
	}
	_ = w.in.Close()
	if werr := w.cmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		err = fmt.Errorf("worker: %w: %s", err, strings.TrimSpace(w.stderr.String()))
	}
	return r, err
}

// procsResult pools one library's convoys at one P, warm or cold.
type procsResult struct {
	makespans, holds, handoffs, waits samples
	acquired, failures, overlaps      int
	notRun                            int // convoys that could not run (a worker failed to start, say)
	serverUsec, serverCalls           float64
	serverKnown                       bool
	errs                              []string
	order                             orderResult
	phases                            phaseResult
}

// orderResult pools the ordering convoys of one library at one P.
type orderResult struct {
	runs            int // ordering convoys that ran
	outOfOrder      int // grants out of the server's arrival order
	arrived         int // grants whose arrival the server's stream placed
	outOfQueueOrder int // grants out of the wait queue's order
	queued          int // grants whose place in the queue was read
	failures        int
	overlaps        int
}

// starts are convoy-procs's two kinds of worker, by whether they are cold.
var starts = [...]bool{false, true}

// startsOf is the order in which round r runs the warm and cold convoys:
// they take turns going first.
func startsOf(r int) [2]bool {
	if r%2 == 1 {
		return [2]bool{true, false}
	}
	return starts
}

// convoyProcs runs convoy-procs for every P of -procs, each library in turn,
// with warm workers and cold ones.
func (b *bench) convoyProcs(ctx context.Context) []row {
	const scenario = "convoy-procs"
	reps := b.convoyReps()
	for _, lib := range b.libs {
		// An untimed convoy of two in this process loads the scripts a
		// waiter and a handoff run, so that no timed window pays for
		// compiling them (an EVAL after NOSCRIPT).
		b.prog.say(scenario, "warm-up, "+lib.name)
		b.runConvoy(ctx, &convoyResult{}, lib.l, b.key(scenario, lib.name+":warm"), 2)
	}
	var rows, phaseRows []row
	for _, p := range b.cfg.procs {
		var res [2][]procsResult // by cold, then library
		for s := range res {
			res[s] = make([]procsResult, len(b.libs))
		}
		for r := range reps {
			for i, lib := range b.libs {
				for _, cold := range startsOf(r) {
					b.prog.say(scenario, fmt.Sprintf("P=%d run %d/%d, %s, %s", p, r+1, reps, lib.name, startName(cold)))
					res := &res[btoi(cold)][i]
					if err := b.runProcConvoy(ctx, res, lib, p, false, cold); err != nil {
						res.notRun++
						res.errs = append(res.errs, err.Error())
					}
				}
			}
		}
		for r := range reps {
			if b.target.mini != nil {
				break // miniredis has no MONITOR
			}
			for i, lib := range b.libs {
				for _, cold := range startsOf(r) {
					b.prog.say(scenario, fmt.Sprintf("P=%d ordering run %d/%d, %s, %s", p, r+1, reps, lib.name, startName(cold)))
					if err := b.runProcConvoy(ctx, &res[btoi(cold)][i], lib, p, true, cold); err != nil {
						b.note(fmt.Sprintf("note: convoy-procs P=%d, %s, %s: an ordering run failed: %v", p, lib.name, startName(cold), err))
					}
				}
			}
		}
		for i, lib := range b.libs {
			warm := res[0][i].row(scenario, lib.name, p, false, b)
			cold := res[1][i].row(scenario, lib.name, p, true, b)
			cold.ToWarm = ratio(cold.Makespan, warm.Makespan)
			rows = append(rows, warm, cold)
			if b.libQueues(lib.name) {
				for _, cold := range starts {
					phaseRows = append(phaseRows, res[btoi(cold)][i].phases.row(lib.name, p, cold, b))
				}
			}
		}
	}
	return append(rows, phaseRows...)
}

// startName says whether a convoy's workers were cold.
func startName(cold bool) string {
	if cold {
		return "cold"
	}
	return "warm"
}

// runProcConvoy runs one convoy of p workers for lib: a timed one, or with
// order an ordering one (see order.go), whose times are not kept.
func (b *bench) runProcConvoy(ctx context.Context, res *procsResult, lib openLib, p int, order, cold bool) error {
	key := b.key("convoy-procs", fmt.Sprintf("%s:P%d", lib.name, p))
	n := p * b.cfg.perProc
	ws, err := b.startWorkers(ctx, lib.name, key, p, order, cold)
	if err != nil {
		return err
	}
	release, err := b.parentHold(ctx, lib.l, key)
	if err != nil {
		stopWorkers(ws)
		return fmt.Errorf("the parent's hold: %w", err)
	}
	var o *ordering
	if order {
		if o, err = startOrdering(ctx, b.target); err != nil {
			stopWorkers(ws)
			_ = release()
			return err
		}
		defer o.close()
	}
	before := b.costSnap(ctx)
	start := time.Now().Add(procStartIn)
	for _, w := range ws {
		fmt.Fprintf(w.in, "go %d\n", start.UnixNano())
	}
	time.Sleep(time.Until(start.Add(time.Duration(n)*b.stagger() + procSettle)))
	if order && lib.lib.queue != nil {
		if o.queue, err = readQueue(ctx, b.client, lib.lib.queue(key), n); err != nil {
			b.note(fmt.Sprintf("note: convoy-procs, %s: reading the wait queue: %v", lib.name, err))
		}
	}
	t0 := time.Now()
	if err := release(); err != nil {
		stopWorkers(ws)
		return fmt.Errorf("the parent's release: %w", err)
	}
	all, sent, err := b.reports(ws)
	if err != nil {
		return err
	}
	if order {
		arrivals, err := o.arrivals(ctx, b.target, b.id)
		res.order.add(all, arrivals, o.queue, lib.lib.queue != nil)
		return err
	}
	res.add(all, t0, costOf(before, b.costSnap(ctx), n, sent))
	return nil
}

// parentHold takes key for the parent, before the contenders arrive, and
// returns what releases it. The wait is bounded like a contender's, since a
// peer's waiter can miss its wake-up and sleep until its context ends
// (rueidislock); the hold is not, since rueidislock's lock ends with the
// context it was taken with.
func (b *bench) parentHold(ctx context.Context, l locker, key string) (release func() error, err error) {
	hctx, cancel := context.WithCancel(ctx)
	giveUp := time.AfterFunc(b.cfg.ttl, cancel)
	h, err := l.acquire(hctx, key)
	if !giveUp.Stop() && err == nil {
		_ = h.Release(ctx)
		err = errors.New("acquired as its wait timed out")
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return func() error {
		defer cancel()
		return h.Release(ctx)
	}, nil
}

// reports reads every worker's report: the contenders, and the commands
// the workers sent. A worker reports within a ttl of the release (its
// contenders give up after one); one that has not after twice that hangs
// (a peer's release that never returns, say), and is killed so that the
// run goes on.
func (b *bench) reports(ws []*worker) ([]procContender, map[string]int64, error) {
	limit := 2*b.cfg.ttl + 30*time.Second
	hung := time.AfterFunc(limit, func() {
		for _, w := range ws {
			_ = w.cmd.Process.Kill()
		}
	})
	var all []procContender
	sent := make(map[string]int64)
	var errs []error
	for _, w := range ws {
		r, err := w.report()
		errs = append(errs, err)
		all = append(all, r.Contenders...)
		for name, k := range r.Sent {
			sent[name] += k
		}
	}
	if !hung.Stop() {
		return nil, nil, fmt.Errorf("a worker did not report within %v of the release and was killed: %w", limit, errors.Join(errs...))
	}
	return all, sent, errors.Join(errs...)
}

// add pools one ordering convoy: its grants in the order they were made,
// ranked by the server's arrival order and, for a library that queues, by
// the queue read before the release.
func (r *orderResult) add(cs []procContender, arrivals map[string]arrival, queue []string, queues bool) {
	r.runs++
	var ok []procContender
	for _, c := range cs {
		if c.Err != "" {
			r.failures++
			continue
		}
		ok = append(ok, c)
	}
	slices.SortFunc(ok, func(a, b procContender) int { return cmp.Compare(a.Granted, b.Granted) })
	for i := 1; i < len(ok); i++ {
		if ok[i].Granted < ok[i-1].Releasing {
			r.overlaps++
		}
	}
	out, known := outOfOrder(arrivalRanks(ok, arrivals))
	r.outOfOrder, r.arrived = r.outOfOrder+out, r.arrived+known
	if queues {
		out, known := outOfOrder(queueRanks(ok, queue))
		r.outOfQueueOrder, r.queued = r.outOfQueueOrder+out, r.queued+known
	}
}

// add pools one convoy's contenders, released from t0, and its server cost.
func (r *procsResult) add(cs []procContender, t0 time.Time, c cost) {
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
	slices.SortFunc(ok, func(a, b procContender) int { return cmp.Compare(a.Granted, b.Granted) })
	last, prev := t0.UnixNano(), t0.UnixNano()
	for i, c := range ok {
		handoff := time.Duration(c.Granted - prev)
		r.waits = append(r.waits, time.Duration(c.Granted-c.Arrival))
		r.holds = append(r.holds, time.Duration(c.Releasing-c.Granted))
		r.handoffs = append(r.handoffs, handoff)
		if c.Phases != nil {
			r.phases.add(*c.Phases)
			r.phases.firstHandoffs = append(r.phases.firstHandoffs, handoff)
		} else {
			r.phases.otherHandoffs = append(r.phases.otherHandoffs, handoff)
		}
		if i > 0 && c.Granted < prev {
			r.overlaps++
		}
		prev, last = c.Releasing, max(last, c.Released)
	}
	r.acquired += len(ok)
	if len(ok) > 0 {
		r.makespans = append(r.makespans, time.Duration(last-t0.UnixNano()))
	}
	if c.serverUsec != nil {
		r.serverKnown = true
		r.serverUsec += *c.serverUsec * float64(len(cs))
		r.serverCalls += *c.serverCalls * float64(len(cs))
	}
}

// libQueues reports whether the library called name queues its waiters on
// the server.
func (b *bench) libQueues(name string) bool {
	l, ok := libraryNamed(name)
	return ok && l.queue != nil
}

func (r *procsResult) row(scenario, lib string, p int, cold bool, b *bench) row {
	per := r.acquired / max(len(r.makespans), 1) // acquisitions per convoy
	ideal := time.Duration(per) * (r.holds.mean() + b.ping)
	makespan := r.makespans.p50()
	out := row{
		Scenario: scenario, Lib: lib, Procs: p, Contenders: b.cfg.perProc, Cold: cold,
		N: r.acquired + r.failures, Acquired: r.acquired,
		P50: int64(r.waits.p50()), P99: int64(r.waits.p99()), WaitP99: int64(r.waits.p99()), WaitMax: int64(r.waits.max()),
		Ratio: ratio(makespan, ideal), RatioTo: "ideal makespan",
		IdealNs: int64(ideal), Makespan: int64(makespan), HoldNs: int64(r.holds.mean()),
		HandoffP50: int64(r.handoffs.p50()), HandoffP99: int64(r.handoffs.p99()),
		Failures: r.failures, Overlaps: r.overlaps + r.order.overlaps,
	}
	if o := r.order; o.runs > 0 {
		out.OutOfOrder, out.Arrived = &o.outOfOrder, o.arrived
		if o.queued > 0 || b.libQueues(lib) {
			out.OutOfQueueOrder, out.Queued = &o.outOfQueueOrder, o.queued
		}
		if o.failures > 0 {
			b.note(fmt.Sprintf("note: convoy-procs P=%d, %s, %s: %d failures in the ordering runs", p, lib, startName(cold), o.failures))
		}
	}
	if r.serverKnown {
		n := float64(r.acquired + r.failures)
		usec, calls := r.serverUsec/n, r.serverCalls/n
		out.ServerUsecPerAcq, out.ServerCallsPerAcq = &usec, &calls
	}
	if len(r.errs) > 0 {
		b.note(fmt.Sprintf("note: convoy-procs P=%d, %s, %s: %d failures, %d convoys not run, e.g. %s", p, lib, startName(cold), r.failures, r.notRun, r.errs[0]))
	}
	return out
}

// spinners are n processes that spin at the lowest priority while the
// latency scenarios (ping, uncontended) run, so that the machine's idle CPUs
// do not halt between round trips: on a VM, waking a halted vCPU costs more
// than a loopback round trip. They stop before the convoys and keys-parallel:
// there they would hold up the wake-ups of the very processes measured
// (convoy-procs saw contenders delayed by milliseconds).
type spinners struct {
	n    int
	cmds []*exec.Cmd
	ins  []io.WriteCloser
}

func (s *spinners) start() error {
	if s.n == 0 {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for range s.n {
		c := exec.Command(self)
		c.Env = append(os.Environ(), roleEnv+"=spinner")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := c.StdinPipe()
		if err == nil {
			err = c.Start()
		}
		if err != nil {
			s.stop()
			return err
		}
		s.cmds, s.ins = append(s.cmds, c), append(s.ins, in)
	}
	return nil
}

// stop ends the spinners, if any run.
func (s *spinners) stop() {
	if s == nil {
		return
	}
	for _, in := range s.ins {
		_ = in.Close()
	}
	for _, c := range s.cmds {
		_ = c.Wait()
	}
	s.cmds, s.ins = nil, nil
}

// spin burns CPU at nice 19 until in closes.
func spin(in io.Reader) {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 19)
	var done atomic.Bool
	go func() { _, _ = io.Copy(io.Discard, in); done.Store(true) }()
	for !done.Load() {
	}
}

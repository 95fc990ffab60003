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

// The bench's child processes are its own binary (or its test binary) run
// again in a role: convoy-procs's lock workers, the semaphore's workers, the
// election's candidates and the spinners. One harness serves them all: the
// bench starts a child with its role and a childConfig in its environment,
// gives it orders on its stdin and reads its reports on its stdout.
const (
	// roleEnv names the role a child plays.
	roleEnv = "LEASEKIT_BENCH_ROLE"
	// childEnv carries a child's childConfig, as JSON.
	childEnv = "LEASEKIT_BENCH_CHILD"
)

// roles are the parts a child can play, by name. Each gets the server its
// config names, dialled (nil for a child told of none), its orders on in,
// and writes its reports to out.
var roles = map[string]func(t *target, cc childConfig, in io.Reader, out io.Writer) error{
	"worker":           runWorker(openLockWorker),
	"semaphore-worker": runWorker(openSemaphoreWorker),
	"candidate":        runCandidate,
	"spinner":          func(_ *target, _ childConfig, in io.Reader, _ io.Writer) error { spin(in); return nil },
}

// childConfig is what a child is told: the server, and what its role needs.
type childConfig struct {
	URL     string   `json:"url,omitempty"`
	Addrs   []string `json:"addrs,omitempty"`
	Cluster bool     `json:"cluster,omitempty"`
	NoTrack bool     `json:"no_tracking,omitempty"` // miniredis: no client-side caching
	// Lib is a lock worker's library.
	Lib string `json:"lib,omitempty"`
	// Key names the lock, the semaphore or the election.
	Key  string        `json:"key,omitempty"`
	TTL  time.Duration `json:"ttl,omitempty"`
	Hold time.Duration `json:"hold,omitempty"`
	// A worker is worker Index of Procs, with PerProc contenders; the
	// contenders of all the workers arrive Stagger apart.
	Index   int           `json:"index,omitempty"`
	Procs   int           `json:"procs,omitempty"`
	PerProc int           `json:"per_proc,omitempty"`
	Stagger time.Duration `json:"stagger,omitempty"`
	// Order makes each contender record the first command of its
	// acquisition, for the ordering pass.
	Order bool `json:"order,omitempty"`
	// Cold makes the worker skip its warm-up and make its library's
	// instance only after "go": its first contender's acquisition is the
	// process's first, as a fresh process's (a cron job's) is.
	Cold bool `json:"cold,omitempty"`
	// Phases makes the first contender stamp the phases of its acquisition
	// (phases.go).
	Phases bool `json:"phases,omitempty"`
}

// childConfig is what this run tells a child about key: its server, ttl
// and hold, and a worker's contenders.
func (b *bench) childConfig(key string) childConfig {
	return childConfig{
		URL: b.cfg.url, Addrs: b.target.addrs, Cluster: b.target.cluster, NoTrack: b.target.noTracking,
		Key: key, TTL: b.cfg.ttl, Hold: b.cfg.hold, PerProc: b.cfg.perProc, Stagger: b.stagger(),
	}
}

// dial opens the server the child was told of; nil when it was told of none.
func (cc childConfig) dial() (*target, error) {
	if len(cc.Addrs) == 0 {
		return nil, nil
	}
	t, err := dial(config{url: cc.URL, addr: cc.Addrs[0], cluster: map[bool][]string{true: cc.Addrs}[cc.Cluster]})
	if err != nil {
		return nil, err
	}
	t.noTracking, t.sent.firsts = cc.NoTrack, cc.Order
	return t, nil
}

// runRole runs the process as a child in role and returns its exit status.
func runRole(role string) int {
	if err := playRole(role); err != nil {
		fmt.Fprintln(os.Stderr, "bench worker:", err)
		return 1
	}
	return 0
}

func playRole(role string) error {
	play, ok := roles[role]
	if !ok {
		return fmt.Errorf("unknown %s %q", roleEnv, role)
	}
	var cc childConfig
	if s := os.Getenv(childEnv); s != "" {
		if err := json.Unmarshal([]byte(s), &cc); err != nil {
			return fmt.Errorf("%s: %w", childEnv, err)
		}
	}
	t, err := cc.dial()
	if err != nil {
		return err
	}
	if t != nil {
		defer t.close()
	}
	return play(t, cc, os.Stdin, os.Stdout)
}

// child is a running child process, seen from the bench.
type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr strings.Builder
}

// startChild starts a child in role, told cc. The end of ctx kills it, and
// so does the bench's death.
func startChild(ctx context.Context, role string, cc childConfig) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(cc)
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.CommandContext(ctx, self)}
	c.cmd.Env = append(os.Environ(), roleEnv+"="+role, childEnv+"="+string(config))
	c.cmd.Stderr = &c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := c.cmd.StdoutPipe()
	if err == nil {
		if c.in, err = c.cmd.StdinPipe(); err == nil {
			err = c.cmd.Start()
		}
	}
	if err != nil {
		return nil, err
	}
	c.out = bufio.NewReader(out)
	return c, nil
}

// said is what the child wrote to stderr, trimmed.
func (c *child) said() string { return strings.TrimSpace(c.stderr.String()) }

// startWorkers starts n workers in role, each told cc as worker i of n, and
// waits until each is ready.
func startWorkers(ctx context.Context, role string, cc childConfig, n int) ([]*child, error) {
	var ws []*child
	for i := range n {
		cc.Index, cc.Procs = i, n
		w, err := startChild(ctx, role, cc)
		if err != nil {
			stopWorkers(ws)
			return nil, err
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		if line, err := w.out.ReadString('\n'); err != nil || !strings.Contains(line, "ready") {
			stopWorkers(ws)
			return nil, fmt.Errorf("%s did not get ready (%v): %s", role, err, w.said())
		}
	}
	return ws, nil
}

func stopWorkers(ws []*child) {
	for _, w := range ws {
		_ = w.in.Close()
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
	}
}

// launch tells the workers to start their contenders' arrivals procStartIn
// from now, and returns that start.
func launch(ws []*child) time.Time { return launchIn(ws, procStartIn) }

// launchIn is launch with the arrivals starting lead after "go".
func launchIn(ws []*child, lead time.Duration) time.Time {
	start := time.Now().Add(lead)
	for _, w := range ws {
		fmt.Fprintf(w.in, "go %d\n", start.UnixNano())
	}
	return start
}

// settle waits until n contenders, arriving stagger apart from start, have
// all arrived, and procSettle more.
func (b *bench) settle(start time.Time, n int) {
	time.Sleep(time.Until(start.Add(time.Duration(n)*b.stagger() + procSettle)))
}

// workerReport is a worker's last line: its contenders, and the commands its
// clients sent.
type workerReport struct {
	Contenders []procContender  `json:"contenders"`
	Sent       map[string]int64 `json:"sent"`
}

// report reads a worker's report and waits for it to exit.
func (w *child) report() (workerReport, error) {
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
		err = fmt.Errorf("worker: %w: %s", err, w.said())
	}
	return r, err
}

// reports reads every worker's report: the contenders, and the commands
// the workers sent. A worker reports within a ttl of the release (its
// contenders give up after one); one that has not after twice that hangs
// (a peer's release that never returns, say), and is killed so that the
// run goes on.
func (b *bench) reports(ws []*child) ([]procContender, map[string]int64, error) {
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

// openWorker readies what a worker role's contenders do, on t: a library's
// lock or a semaphore's permit, warmed up unless cc says cold. stop closes
// it.
type openWorker func(ctx context.Context, t *target, cc childConfig) (c contention, stop func(), err error)

// runWorker is a worker role: it opens its contention, says it is ready,
// waits for "go <unix ns>", runs its contenders, whose arrivals interleave
// with the other workers', and reports.
func runWorker(open openWorker) func(*target, childConfig, io.Reader, io.Writer) error {
	return func(t *target, cc childConfig, in io.Reader, out io.Writer) error {
		ctx := context.Background()
		var c contention
		stop := func() {}
		var err error
		if !cc.Cold {
			if c, stop, err = open(ctx, t, cc); err != nil {
				return err
			}
		}
		defer func() { stop() }()
		fmt.Fprintln(out, `{"ready":true}`)
		start, err := awaitGo(in)
		if err != nil {
			return err
		}
		if cc.Cold {
			// A cold worker makes its library's instance after "go", as a
			// fresh process does before its first acquire: a client that
			// dials as it is made (rueidis) dials in the timed span.
			if c, stop, err = open(ctx, t, cc); err != nil {
				return err
			}
		}
		made := time.Now().UnixNano()
		before := t.sent.counts()
		seen := contendHere(ctx, c, cc.PerProc, func(i int) time.Time {
			return start.Add(time.Duration(i*cc.Procs+cc.Index) * cc.Stagger)
		})()
		for i := range seen {
			if cc.Cold {
				seen[i].Made = made
			}
		}
		return json.NewEncoder(out).Encode(workerReport{Contenders: seen, Sent: t.sent.since(before)})
	}
}

// awaitGo reads the bench's "go <unix ns>": the start of the arrivals.
func awaitGo(in io.Reader) (time.Time, error) {
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		return time.Time{}, fmt.Errorf("waiting for go: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "go ")), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("go line %q: %w", line, err)
	}
	return time.Unix(0, ns), nil
}

// contention is what a contender does: it arrives, acquires (giving up after
// ttl), holds for hold and releases.
type contention struct {
	acquire   func(ctx context.Context) (held, error)
	ttl, hold time.Duration
	// order records each acquisition's first command (order.go).
	order bool
	// phases, if not nil, stamps the phases of the first contender's
	// acquisition (phases.go).
	phases *phaseHook
}

// contendHere starts n contenders in this process, contender i arriving at
// arrival(i); the func it returns waits for them and returns what they saw.
func contendHere(ctx context.Context, c contention, n int, arrival func(i int) time.Time) func() []procContender {
	seen := make([]procContender, n)
	var wg sync.WaitGroup
	for i := range seen {
		at := arrival(i)
		wg.Go(func() { seen[i] = c.contend(ctx, at, i == 0) })
	}
	return func() []procContender {
		wg.Wait()
		return seen
	}
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
	// Made is when a cold worker had made its library's instance (and its
	// client, for a library with a client of its own); 0 in a warm one.
	Made int64 `json:"made,omitempty"`
}

// pool is what the runs of one setting of staggered contenders (a
// convoy-procs P, warm or cold; a semaphore's P and C) have in common.
type pool struct {
	makespans, holds, waits samples
	acquired, failures      int
	overlaps                int
	serverUsec, serverCalls float64
	serverKnown             bool
	errs                    []string
}

// add pools one run's contenders, released from t0, and its server cost,
// and returns the contenders that acquired, in the order of their grants.
func (p *pool) add(cs []procContender, t0 time.Time, c cost) []procContender {
	var ok []procContender
	for _, pc := range cs {
		if pc.Err != "" {
			p.failures++
			if len(p.errs) < 3 {
				p.errs = append(p.errs, pc.Err)
			}
			continue
		}
		ok = append(ok, pc)
	}
	slices.SortFunc(ok, func(a, b procContender) int { return cmp.Compare(a.Granted, b.Granted) })
	last := t0.UnixNano()
	for _, pc := range ok {
		p.waits = append(p.waits, time.Duration(pc.Granted-pc.Arrival))
		p.holds = append(p.holds, time.Duration(pc.Releasing-pc.Granted))
		last = max(last, pc.Released)
	}
	p.acquired += len(ok)
	if len(ok) > 0 {
		p.makespans = append(p.makespans, time.Duration(last-t0.UnixNano()))
	}
	if c.serverUsec != nil {
		p.serverKnown = true
		p.serverUsec += *c.serverUsec * float64(len(cs))
		p.serverCalls += *c.serverCalls * float64(len(cs))
	}
	return ok
}

// perRun is the acquisitions of a run, on average.
func (p *pool) perRun() int { return p.acquired / max(len(p.makespans), 1) }

// row is the setting's row as far as the pool knows it: the acquisitions,
// the waits, the makespan against ideal, and the server's cost per
// acquisition.
func (p *pool) row(ideal time.Duration) row {
	makespan := p.makespans.p50()
	out := row{
		N: p.acquired + p.failures, Acquired: p.acquired,
		P50: int64(p.waits.p50()), P99: int64(p.waits.p99()), WaitP99: int64(p.waits.p99()), WaitMax: int64(p.waits.max()),
		Ratio: ratio(makespan, ideal), RatioTo: "ideal makespan",
		IdealNs: int64(ideal), Makespan: int64(makespan), HoldNs: int64(p.holds.mean()),
		Failures: p.failures, Overlaps: p.overlaps,
	}
	if p.serverKnown {
		n := float64(max(p.acquired+p.failures, 1))
		usec, calls := p.serverUsec/n, p.serverCalls/n
		out.ServerUsecPerAcq, out.ServerCallsPerAcq = &usec, &calls
	}
	return out
}

// contend arrives at arrival, acquires, holds and releases; the first
// contender stamps the phases of its acquisition when c says so.
func (c contention) contend(ctx context.Context, arrival time.Time, first bool) (pc procContender) {
	time.Sleep(time.Until(arrival))
	actx := ctx
	var log *phaseLog
	phases := map[bool]*phaseHook{true: c.phases}[first]
	if phases != nil {
		actx, log = withPhaseLog(ctx)
	}
	if c.order {
		var cmd *firstCommand
		actx, cmd = withFirstCommand(actx)
		defer func() {
			for _, a := range cmd.get() {
				pc.First = append(pc.First, []byte(a))
			}
		}()
	}
	pc.Arrival = time.Now().UnixNano()
	actx, cancel := context.WithTimeout(actx, c.ttl)
	defer cancel()
	h, err := c.acquire(actx)
	pc.Granted = time.Now().UnixNano()
	if err != nil {
		pc.Err = err.Error()
		return pc
	}
	if phases != nil {
		// From the contender's scheduled arrival, when that came first: a
		// cold worker opens its library after "go", and the subscription
		// that serves all its contenders may start with another's call.
		from := time.Unix(0, pc.Arrival)
		if arrival.Before(from) {
			from = arrival
		}
		f := phases.phases(log, from)
		pc.Phases = &f
	}
	time.Sleep(c.hold)
	pc.Releasing = time.Now().UnixNano()
	if err := h.Release(ctx); err != nil {
		pc.Err = "release: " + err.Error()
	}
	pc.Released = time.Now().UnixNano()
	return pc
}

// warmUp acquires, and while it holds a second contender asks and waits, so
// that connections, loaded scripts and the waiting path (a subscription in
// the node that owns the key) are ready before the timed run: otherwise the
// first waiter of each process pays for a dial that the others do not, and
// can queue behind a waiter that arrived after it. Best effort, and
// bounded.
func warmUp(ctx context.Context, acquire func(ctx context.Context) (held, error)) {
	ctx, cancel := context.WithTimeout(ctx, warmUpLimit)
	defer cancel()
	h, err := acquire(ctx)
	if err != nil {
		return
	}
	second := make(chan struct{})
	go func() {
		defer close(second)
		if h, err := acquire(ctx); err == nil {
			_ = h.Release(ctx)
		}
	}()
	time.Sleep(warmUpHold)
	_ = h.Release(ctx)
	<-second
}

const (
	// warmUpHold is how long warmUp holds: long enough for the second
	// contender to find it held.
	warmUpHold = 20 * time.Millisecond
	// warmUpLimit bounds a warm-up.
	warmUpLimit = 5 * time.Second
)

// spinners are n processes that spin at the lowest priority while the
// latency scenarios (ping, uncontended) run, so that the machine's idle CPUs
// do not halt between round trips: on a VM, waking a halted vCPU costs more
// than a loopback round trip. They stop before the convoys and keys-parallel:
// there they would hold up the wake-ups of the very processes measured
// (convoy-procs saw contenders delayed by milliseconds).
type spinners struct {
	n        int
	children []*child
}

func (s *spinners) start() error {
	for range s.n {
		c, err := startChild(context.Background(), "spinner", childConfig{})
		if err != nil {
			s.stop()
			return err
		}
		s.children = append(s.children, c)
	}
	return nil
}

// stop ends the spinners, if any run.
func (s *spinners) stop() {
	if s == nil {
		return
	}
	for _, c := range s.children {
		_ = c.in.Close()
	}
	for _, c := range s.children {
		_ = c.cmd.Wait()
	}
	s.children = nil
}

// spin burns CPU at nice 19 until in closes.
func spin(in io.Reader) {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 19)
	var done atomic.Bool
	go func() { _, _ = io.Copy(io.Discard, in); done.Store(true) }()
	for !done.Load() {
	}
}

package history_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	// soakEnv sets the soak's duration (a Go duration such as "2m").
	// Default: 20s, or 3s with -short.
	soakEnv = "LEASEKIT_SOAK"

	soakWorkers = 64
	// soakProcesses is how many clients, each with its own Lockers, the
	// workers share, as that many processes would.
	soakProcesses = 8
	soakKeys      = 1000
	// soakHotKeys take half the operations, so that locks are contended.
	soakHotKeys = 10

	// soakTTL is far above any hold: a lease lost in the soak is a bug, not
	// bad luck.
	soakTTL = 10 * time.Second
	// soakOpTimeout bounds one operation, waiting included: hitting it means
	// a waiter was never woken.
	soakOpTimeout = 30 * time.Second
	// settleTimeout bounds the wait for goroutines and connections to go
	// once everything is closed.
	settleTimeout = 10 * time.Second
)

type soakOp int

const (
	opObtain soakOp = iota
	opTryObtain
	opDo
	opOnce
	opAcquire
	opTryAcquire
	opFencedDo
	opStaleWrite
	numOps
)

var opNames = [numOps]string{"Obtain", "TryObtain", "Do", "Once", "Acquire", "TryAcquire", "correctness Do", "stale write"}

// TestSoak runs 64 goroutines in 8 simulated processes for 20 seconds (see
// soakEnv) on 1,000 keys of a real redis-server, half the operations on 10 hot
// keys, mixing efficiency Obtain, TryObtain, Do and Once with correctness
// Acquire, TryAcquire and Do, each holder writing to the Register with its
// token, and writes with tokens of leases already released. Do's ttl and
// Once's period are short, derived from a round trip measured under the
// soak's concurrency (see soakTimesOf). It checks:
//   - no double holder: a per-key count of in-process holders (taken after
//     the acquire, dropped before the release; Do's and Once's fn count too)
//     never exceeds one;
//   - no stale write accepted: a write is never accepted with a token lower
//     than one whose acceptance had been acknowledged before it was sent, a
//     holder's write is never rejected, and each register ends holding the
//     highest token acknowledged for it;
//   - no lease lost, no operation failed or hung, but for the losses a
//     loaded machine can cause: a grant whose reply came after its lease
//     deadline (ErrLateGrant), or a Do whose refresh could not be confirmed
//     before its deadline (ErrLockLost), each only from a call that ran for
//     at least half its ttl, as such a loss takes;
//   - once the Lockers and clients are closed, goroutines and server
//     connections are back to their baseline.
func TestSoak(t *testing.T) {
	d := soakDuration(t)
	b := redistest.Real(t)
	times := soakTimesOf(t, b.Client) // before the baseline: it fills the client's pool
	base := baselineOf(t, b.Client)
	procs := make([]*soakProcess, soakProcesses)
	for i := range procs {
		procs[i] = newSoakProcess(t, b.Server.Addr)
	}
	s := &soak{failures: make(chan error, 100), times: times}
	s.run(t.Context(), procs, d)
	close(s.failures)
	for err := range s.failures {
		t.Error(err)
	}
	if n := s.dropped.Load(); n > 0 {
		t.Errorf("%d more failures not shown", n)
	}
	s.checkRegisters(t, correctness.NewRegister(b.Client))
	s.report(t)
	closeAndCount(t, b.Client, procs, base)
}

// run runs the workers for d and waits for them to finish the operations
// they started.
func (s *soak) run(ctx context.Context, procs []*soakProcess, d time.Duration) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range soakWorkers {
		wg.Go(func() { s.worker(ctx, procs[w%soakProcesses], uint64(w), stop) })
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
}

// soakTimes are the soak's short ttls.
type soakTimes struct {
	// doTTL, Do's ttl, is short enough that a long run of fn (up to
	// longHold) needs refreshes.
	doTTL, longHold time.Duration
	period          time.Duration // of Once
}

// soakTimesOf derives the soak's short ttls from a round trip measured with
// the soak's concurrency, on the machine as loaded now: Do's ttl is a second
// or ten round trips, Once's period 200 ms or four.
func soakTimesOf(t *testing.T, client *redis.Client) soakTimes {
	t.Helper()
	rt := loadedRoundTrip(t, client, soakWorkers)
	st := soakTimes{doTTL: ttlFor(rt, 10, time.Second, 10*time.Second), period: ttlFor(rt, 4, 200*time.Millisecond, 4*time.Second)}
	st.longHold = st.doTTL * 2 / 5
	t.Logf("Do's ttl %v, Once's period %v (loaded round trip p99 %v)", st.doTTL, st.period, rt)
	return st
}

// baseline is what was running before the soak: goroutines, and connections
// on the server.
type baseline struct {
	goroutines, conns int
}

func baselineOf(t *testing.T, admin *redis.Client) baseline {
	t.Helper()
	return baseline{goroutines: runtime.NumGoroutine(), conns: clientCount(t, admin)}
}

// closeAndCount closes the Lockers, then the clients, of procs, and checks
// that each step gives back what it should: once the Lockers are closed the
// server has only the clients' pooled connections (no subscription is left),
// once the clients are closed not even those, and at the end no goroutine is
// left.
func closeAndCount(t *testing.T, admin *redis.Client, procs []*soakProcess, base baseline) {
	t.Helper()
	for _, p := range procs {
		p.closeLockers(t)
	}
	count := func() int { return clientCount(t, admin) }
	awaitCount(t, "connections on the server after closing the Lockers", base.conns+pooled(procs), count)
	for _, p := range procs {
		if err := p.client.Close(); err != nil {
			t.Errorf("closing a client: %v", err)
		}
	}
	awaitCount(t, "connections on the server after closing the clients", base.conns, count)
	if !awaitCount(t, "goroutines after closing the Lockers and clients", base.goroutines, runtime.NumGoroutine) {
		var stacks strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		t.Logf("goroutines:\n%s", stacks.String())
	}
}

func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 20s", soakEnv, v)
		}
		return d
	}
	if testing.Short() {
		return 3 * time.Second
	}
	return 20 * time.Second
}

// soakProcess is what one process of the soak would have: a client and its
// Lockers.
type soakProcess struct {
	client *redis.Client
	eff    *efficiency.Locker
	corr   *correctness.Locker
	reg    *correctness.Register
}

func newSoakProcess(t *testing.T, addr string) *soakProcess {
	client := redis.NewClient(&redis.Options{Addr: addr})
	p := &soakProcess{
		client: client,
		eff:    efficiency.New(client),
		corr:   correctness.New(client, correctness.WithAudit(false)),
		reg:    correctness.NewRegister(client),
	}
	// The test closes them itself to count what is left; these only matter
	// when it stops early.
	t.Cleanup(func() {
		_ = p.eff.Close()
		_ = p.corr.Close()
		_ = client.Close()
	})
	return p
}

func (p *soakProcess) closeLockers(t *testing.T) {
	t.Helper()
	if err := p.eff.Close(); err != nil {
		t.Errorf("closing an efficiency Locker: %v", err)
	}
	if err := p.corr.Close(); err != nil {
		t.Errorf("closing a correctness Locker: %v", err)
	}
	if got := p.client.PoolStats().PubSubStats.Active; got != 0 {
		t.Errorf("active pub/sub connections of a client after closing its Lockers: got %d, want 0", got)
	}
}

// soak is the shared state of the workers: what they observed, and their
// failures.
type soak struct {
	times       soakTimes
	effHolders  [soakKeys]atomic.Int32
	corrHolders [soakKeys]atomic.Int32

	mu sync.Mutex
	// acked is, per resource, the highest token whose accepted write has
	// returned to its worker. Redis linearizes the writes, so a write sent
	// after that return must not be accepted with a lower token.
	acked [soakKeys]uint64

	ops           [numOps]atomic.Int64
	staleRejected atomic.Int64
	loadLosses    atomic.Int64 // late grants and Do's leases lost, from calls long enough
	failures      chan error
	dropped       atomic.Int64
}

// lostToLoad reports whether err, from a call that took took with a lease of
// ttl, is a loss that a loaded machine can cause, and counts it: a late
// grant (its reply came after the lease's deadline), or a lease that Do could
// not confirm before its deadline. Either takes at least the lease's length
// less the drift margin, which is never more than half the ttl, so one that
// came sooner is a failure.
func (s *soak) lostToLoad(err error, ttl, took time.Duration) bool {
	late := errors.Is(err, efficiency.ErrLateGrant) || errors.Is(err, correctness.ErrLateGrant) ||
		errors.Is(err, efficiency.ErrLockLost) || errors.Is(err, correctness.ErrLockLost)
	if late && took >= ttl/2 {
		s.loadLosses.Add(1)
		return true
	}
	return false
}

// fail reports a failure to the test goroutine; past the channel's capacity
// it only counts it.
func (s *soak) fail(format string, args ...any) {
	select {
	case s.failures <- fmt.Errorf(format, args...):
	default:
		s.dropped.Add(1)
	}
}

// grant is a token a worker held for a key, kept to write with after its
// lease is gone.
type grant struct {
	key   int
	token uint64
}

type soakWorker struct {
	s    *soak
	p    *soakProcess
	rng  *rand.Rand
	past []grant
}

func (s *soak) worker(ctx context.Context, p *soakProcess, seed uint64, stop <-chan struct{}) {
	w := &soakWorker{s: s, p: p, rng: rand.New(rand.NewPCG(seed, 12))}
	for {
		select {
		case <-stop:
			return
		default:
		}
		op := soakOp(w.rng.IntN(int(numOps)))
		k := w.key()
		opCtx, cancel := context.WithTimeout(ctx, soakOpTimeout)
		w.run(opCtx, op, k)
		cancel()
		s.ops[op].Add(1)
	}
}

func (w *soakWorker) key() int {
	if w.rng.IntN(2) == 0 {
		return w.rng.IntN(soakHotKeys)
	}
	return w.rng.IntN(soakKeys)
}

func keyName(k int) string { return fmt.Sprintf("soak-%d", k) }

func (w *soakWorker) run(ctx context.Context, op soakOp, k int) {
	switch op {
	case opObtain, opTryObtain:
		w.obtainAndHold(ctx, op, k)
	case opDo:
		w.do(ctx, k)
	case opOnce:
		w.once(ctx, k)
	case opAcquire, opTryAcquire:
		w.acquireAndWrite(ctx, op, k)
	case opFencedDo:
		w.fencedDo(ctx, k)
	case opStaleWrite:
		if len(w.past) > 0 {
			g := w.past[w.rng.IntN(len(w.past))]
			w.write(ctx, g.key, g.token, false)
		}
	}
}

func (w *soakWorker) obtainAndHold(ctx context.Context, op soakOp, k int) {
	s, name := w.s, keyName(k)
	obtain := w.p.eff.Obtain
	if op == opTryObtain {
		obtain = w.p.eff.TryObtain
	}
	start := time.Now()
	lock, err := obtain(ctx, name, soakTTL)
	if op == opTryObtain && errors.Is(err, efficiency.ErrNotObtained) || s.lostToLoad(err, soakTTL, time.Since(start)) {
		return
	}
	if err != nil {
		s.fail("%s %s: %v", opNames[op], name, err)
		return
	}
	w.hold(ctx, &s.effHolders[k], "efficiency", name, false)
	if err := lock.Release(ctx); err != nil {
		s.fail("Release %s: %v", name, err)
	}
}

func (w *soakWorker) do(ctx context.Context, k int) {
	s, name := w.s, keyName(k)
	start := time.Now()
	err := w.p.eff.Do(ctx, name, s.times.doTTL, func(ctx context.Context) error {
		w.hold(ctx, &s.effHolders[k], "efficiency", name, true)
		return nil
	})
	if err != nil && !s.lostToLoad(err, s.times.doTTL, time.Since(start)) {
		s.fail("Do %s: %v", name, err)
	}
}

func (w *soakWorker) once(ctx context.Context, k int) {
	s, name := w.s, keyName(k)
	start := time.Now()
	_, err := w.p.eff.Once(ctx, name, s.times.period, func(ctx context.Context) error {
		w.hold(ctx, &s.effHolders[k], "efficiency", name, false)
		return nil
	})
	if err != nil && !s.lostToLoad(err, s.times.period, time.Since(start)) {
		s.fail("Once %s: %v", name, err)
	}
}

func (w *soakWorker) fencedDo(ctx context.Context, k int) {
	s, name := w.s, keyName(k)
	start := time.Now()
	err := w.p.corr.Do(ctx, name, s.times.doTTL, func(ctx context.Context, token uint64) error {
		w.enter(&s.corrHolders[k], "correctness", name)
		defer s.corrHolders[k].Add(-1)
		w.write(ctx, k, token, true)
		w.pause(ctx, true)
		return nil
	})
	if err != nil && !s.lostToLoad(err, s.times.doTTL, time.Since(start)) {
		s.fail("correctness Do %s: %v", name, err)
	}
}

func (w *soakWorker) acquireAndWrite(ctx context.Context, op soakOp, k int) {
	s, name := w.s, keyName(k)
	acquire := w.p.corr.Acquire
	if op == opTryAcquire {
		acquire = w.p.corr.TryAcquire
	}
	start := time.Now()
	lease, err := acquire(ctx, name, soakTTL)
	if op == opTryAcquire && errors.Is(err, correctness.ErrNotObtained) || s.lostToLoad(err, soakTTL, time.Since(start)) {
		return
	}
	if err != nil {
		s.fail("%s %s: %v", opNames[op], name, err)
		return
	}
	w.enter(&s.corrHolders[k], "correctness", name)
	value := w.write(ctx, k, lease.Token(), true)
	// While the lease is held nobody else can write a newer token, and an
	// older one is rejected: the register holds this holder's write.
	if got, token, err := w.p.reg.Read(ctx, name); err != nil || token != lease.Token() || string(got) != value {
		s.fail("Read %s while holding token %d: got %q@%d, %v; want %q@%d", name, lease.Token(), got, token, err, value, lease.Token())
	}
	w.pause(ctx, false)
	s.corrHolders[k].Add(-1)
	if err := lease.Release(ctx); err != nil {
		s.fail("Release %s: %v", name, err)
	}
}

// hold counts the worker as a holder of the lock while it works.
func (w *soakWorker) hold(ctx context.Context, holders *atomic.Int32, kind, name string, long bool) {
	w.enter(holders, kind, name)
	w.pause(ctx, long)
	holders.Add(-1)
}

func (w *soakWorker) enter(holders *atomic.Int32, kind, name string) {
	if n := holders.Add(1); n != 1 {
		w.s.fail("%s lock %s: %d holders at once", kind, name, n)
	}
}

// pause is the holder's work: mostly nothing, sometimes up to a millisecond,
// and where long is allowed now and then long enough to need refreshes.
func (w *soakWorker) pause(ctx context.Context, long bool) {
	var d time.Duration
	switch n := w.rng.IntN(100); {
	case long && n < 5:
		d = time.Duration(w.rng.Int64N(int64(w.s.times.longHold)))
	case n < 30:
		d = time.Duration(w.rng.Int64N(int64(time.Millisecond)))
	default:
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// write writes to the register of key k with token and checks the outcome
// against what earlier writes acknowledged. holder says whether the worker
// holds the lease of token. It returns the value written.
func (w *soakWorker) write(ctx context.Context, k int, token uint64, holder bool) string {
	s, name := w.s, keyName(k)
	value := fmt.Sprintf("%s@%d", name, token)
	s.mu.Lock()
	before := s.acked[k]
	s.mu.Unlock()
	err := w.p.reg.Write(ctx, name, token, []byte(value))
	var stale *correctness.StaleTokenError
	switch {
	case err == nil:
		if token < before {
			s.fail("stale write accepted: %s token %d, after token %d had been accepted", name, token, before)
		}
		s.mu.Lock()
		s.acked[k] = max(s.acked[k], token)
		s.mu.Unlock()
		if holder {
			w.past = append(w.past, grant{k, token})
			if len(w.past) > 16 {
				w.past = w.past[1:]
			}
		}
	case errors.As(err, &stale):
		if holder {
			s.fail("write of %s by the holder of token %d rejected: %v", name, token, err)
		} else if stale.Highest <= token {
			s.fail("write of %s with token %d rejected for highest %d, which is not newer", name, token, stale.Highest)
		}
		s.staleRejected.Add(1)
	default:
		s.fail("Write %s token %d: %v", name, token, err)
	}
	return value
}

// checkRegisters reads every register written and compares its token with
// the highest acknowledged.
func (s *soak) checkRegisters(t *testing.T, reg *correctness.Register) {
	t.Helper()
	for k, want := range s.acked {
		if want == 0 {
			continue
		}
		_, got, err := reg.Read(t.Context(), keyName(k))
		if err != nil || got != want {
			t.Errorf("final token of register %s: got %d, %v; want %d, the highest accepted", keyName(k), got, err, want)
		}
	}
}

// report logs what the soak did, and fails it if a kind of operation never
// ran: the soak would then prove nothing about it.
func (s *soak) report(t *testing.T) {
	t.Helper()
	var parts []string
	for op := range numOps {
		n := s.ops[op].Load()
		parts = append(parts, fmt.Sprintf("%s %d", opNames[op], n))
		if n == 0 {
			t.Errorf("%s operations: got 0, want some", opNames[op])
		}
	}
	t.Logf("operations: %s; stale writes rejected: %d; grants late or leases lost on the loaded machine: %d",
		strings.Join(parts, ", "), s.staleRejected.Load(), s.loadLosses.Load())
	if s.staleRejected.Load() == 0 {
		t.Errorf("stale writes rejected: got 0, want some")
	}
}

// clientCount counts the server's client connections (replicas and monitors
// aside).
func clientCount(t *testing.T, admin *redis.Client) int {
	t.Helper()
	list, err := admin.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	return strings.Count(list, "\n")
}

// pooled counts the connections in the pools of the processes' clients.
func pooled(procs []*soakProcess) int {
	n := 0
	for _, p := range procs {
		st := p.client.PoolStats()
		n += int(st.TotalConns)
		if st.PipelineStats != nil {
			n += int(st.PipelineStats.TotalConns)
		}
	}
	return n
}

// awaitCount waits up to settleTimeout for count to come down to want, and
// reports whether it did. Closed connections and ended goroutines go away
// asynchronously: this is a bound for a leak, not a timing assertion.
func awaitCount(t *testing.T, what string, want int, count func() int) bool {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		got := count()
		if got <= want {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: got %d, want %d (after waiting %v)", what, got, want, settleTimeout)
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package processes_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/correctness/etcdtokens"
	"github.com/leasekit/leasekit/internal/testkit/etcdtest"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdWorkerEnv configures an etcd worker child: "LOCKADDR RESOURCEADDR
// NAME TTL ENDPOINTS", the endpoints comma-separated. It is not
// etcdtest.EndpointsEnv, which names the shared cluster.
const etcdWorkerEnv = "LEASEKIT_ETCD_WORKER"

// etcdResource is the resource that the etcd workers write.
const etcdResource = "account"

// etcdWorkerChild takes one lock again and again with a correctness Locker
// whose tokens come from etcd (etcdtokens), on the lock's Redis, and writes
// each grant's token, as value and as fencing token, to a Register on the
// resource's Redis. It prints
//
//	holding TOKEN
//	grant TOKEN ACQSTART ACQEND WSTART WEND RESULT
//	error CLASS ACQSTART ACQEND
//
// the first as soon as an acquire returns a grant (the nemesis looks for a
// holder to freeze before its write), the second once the grant's write
// returned, the third for an acquire that failed. The times are in ns of
// the wall clock (time.Now().UnixNano(), comparable between processes of
// one machine), read just before the Acquire, just after it returned, just
// before the Write and just after it. RESULT is ok, stale (the fence
// refused the token) or error; CLASS is notoken (ErrNoToken), late
// (ErrLateGrant), notobtained (ErrNotObtained: the acquire's 5s ran out) or
// other. Each time is read on the outer side of its call, so that a pause
// between the clock and the call only widens the interval that the checks
// (checkEtcdHistory) take the call to lie in.
func etcdWorkerChild() int {
	f := strings.Fields(os.Getenv(etcdWorkerEnv))
	if len(f) != 5 {
		fmt.Fprintf(os.Stderr, "%s wants 5 fields, has %d\n", etcdWorkerEnv, len(f))
		return 2
	}
	lockAddr, resourceAddr, name, endpoints := f[0], f[1], f[2], strings.Split(f[4], ",")
	ttl, err := time.ParseDuration(f[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lockClient := redis.NewClient(&redis.Options{Addr: lockAddr})
	defer lockClient.Close()
	resourceClient := redis.NewClient(&redis.Options{Addr: resourceAddr})
	defer resourceClient.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer cli.Close()
	l := correctness.New(lockClient, correctness.WithTokens(etcdtokens.New(cli)),
		correctness.WithAudit(false), correctness.WithLogger(quiet))
	defer l.Close()
	register := correctness.NewRegister(resourceClient)
	bg := context.Background()
	for {
		acqStart := time.Now().UnixNano()
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		lease, err := l.Acquire(ctx, name, ttl)
		acqEnd := time.Now().UnixNano()
		cancel()
		if err != nil {
			fmt.Println("error", failureClass(err), acqStart, acqEnd)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		token := lease.Token()
		fmt.Println("holding", token)
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		ctx, cancel = context.WithTimeout(bg, 2*time.Second)
		wStart := time.Now().UnixNano()
		err = register.Write(ctx, etcdResource, token, []byte(strconv.FormatUint(token, 10)))
		wEnd := time.Now().UnixNano()
		cancel()
		result := "ok"
		switch {
		case errors.Is(err, correctness.ErrStaleToken):
			result = "stale"
		case err != nil:
			result = "error"
		}
		fmt.Println("grant", token, acqStart, acqEnd, wStart, wEnd, result)
		ctx, cancel = context.WithTimeout(bg, time.Second)
		_ = lease.Release(ctx)
		cancel()
	}
}

// failureClass is the CLASS of a failed acquire's "error" line.
func failureClass(err error) string {
	switch {
	case errors.Is(err, correctness.ErrNoToken):
		return "notoken"
	case errors.Is(err, correctness.ErrLateGrant):
		return "late"
	case errors.Is(err, correctness.ErrNotObtained):
		return "notobtained"
	}
	return "other"
}

// etcdGrant is one grant an etcd worker reported: its token, the interval
// its acquire lay in, the interval its write lay in, and the write's result.
type etcdGrant struct {
	token            uint64
	acqStart, acqEnd int64 // ns
	wStart, wEnd     int64 // ns
	result           string
}

// parseEtcdGrant reads a worker's "grant ..." line.
func parseEtcdGrant(line string) (etcdGrant, error) {
	f := strings.Fields(line)
	if len(f) != 7 || f[0] != "grant" {
		return etcdGrant{}, fmt.Errorf("not a grant line: %q", line)
	}
	var g etcdGrant
	var err error
	if g.token, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return etcdGrant{}, fmt.Errorf("%q: %w", line, err)
	}
	for i, p := range []*int64{&g.acqStart, &g.acqEnd, &g.wStart, &g.wEnd} {
		if *p, err = strconv.ParseInt(f[2+i], 10, 64); err != nil {
			return etcdGrant{}, fmt.Errorf("%q: %w", line, err)
		}
	}
	switch g.result = f[6]; g.result {
	case "ok", "stale", "error":
	default:
		return etcdGrant{}, fmt.Errorf("%q: unknown result %q", line, g.result)
	}
	return g, nil
}

// etcdFailure is one failed acquire an etcd worker reported.
type etcdFailure struct {
	class      string
	start, end int64 // ns
}

// parseEtcdFailure reads a worker's "error ..." line.
func parseEtcdFailure(line string) (etcdFailure, error) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "error" {
		return etcdFailure{}, fmt.Errorf("not an error line: %q", line)
	}
	e := etcdFailure{class: f[1]}
	var err error
	for i, p := range []*int64{&e.start, &e.end} {
		if *p, err = strconv.ParseInt(f[2+i], 10, 64); err != nil {
			return etcdFailure{}, fmt.Errorf("%q: %w", line, err)
		}
	}
	return e, nil
}

// etcdFindings is what checkEtcdHistory found wrong, with a few examples.
type etcdFindings struct {
	inversions    int // grants whose token is not above an earlier grant's
	duplicates    int // grants whose token another grant had too
	storedDown    int // times the register's token was seen to go down
	staleAccepted int // writes accepted below a token accepted before
	examples      []string
}

// checkEtcdHistory counts, in a history of grants and in the sequence of
// tokens that the resource's register was seen to hold (stored):
//
//   - token inversions: grants B whose acquire started after another grant
//     A's had returned (B.acqStart > A.acqEnd), with B.token <= A.token. A
//     token is drawn from etcd inside its acquire, so a linearizable source
//     gives B a greater one, whatever the lock's Redis forgot.
//   - duplicate tokens: grants that got a token another grant got too,
//     whenever their acquires ran.
//   - stored tokens going down: a token of the register lower than the one
//     it was seen to hold before.
//   - stale writes accepted: writes that the fence accepted with a token
//     lower than that of a write it had accepted before (one whose write
//     ended before this one's began).
//
// The first and last are computed with a sort, not by pairs: for each B,
// the greatest token among the grants whose acquire returned before B's
// started; for each accepted write, the greatest token among the accepted
// writes that ended before it began.
func checkEtcdHistory(grants []etcdGrant, stored []uint64) etcdFindings {
	var out etcdFindings
	example := func(format string, args ...any) {
		if len(out.examples) < 10 {
			out.examples = append(out.examples, fmt.Sprintf(format, args...))
		}
	}

	byAcqEnd := slices.Clone(grants)
	slices.SortFunc(byAcqEnd, func(a, b etcdGrant) int { return cmp.Compare(a.acqEnd, b.acqEnd) })
	maxToken := greatestTokens(byAcqEnd)
	for _, b := range grants {
		// The grants whose acquire returned before b's started.
		n, _ := slices.BinarySearchFunc(byAcqEnd, b.acqStart, func(g etcdGrant, t int64) int { return cmp.Compare(g.acqEnd, t) })
		if n == 0 {
			continue
		}
		if a := byAcqEnd[maxToken[n-1]]; b.token <= a.token {
			out.inversions++
			example("token inversion: token %d acquired in [%d, %d] after token %d in [%d, %d]",
				b.token, b.acqStart, b.acqEnd, a.token, a.acqStart, a.acqEnd)
		}
	}

	byToken := slices.Clone(grants)
	slices.SortFunc(byToken, func(a, b etcdGrant) int { return cmp.Compare(a.token, b.token) })
	for i := 1; i < len(byToken); i++ {
		if a, b := byToken[i-1], byToken[i]; a.token == b.token {
			out.duplicates++
			example("duplicate token: %d acquired in [%d, %d] and in [%d, %d]",
				a.token, a.acqStart, a.acqEnd, b.acqStart, b.acqEnd)
		}
	}

	for i := 1; i < len(stored); i++ {
		if stored[i] < stored[i-1] {
			out.storedDown++
			example("the register held token %d, then %d", stored[i-1], stored[i])
		}
	}

	var okByWEnd []etcdGrant
	for _, g := range grants {
		if g.result == "ok" {
			okByWEnd = append(okByWEnd, g)
		}
	}
	slices.SortFunc(okByWEnd, func(a, b etcdGrant) int { return cmp.Compare(a.wEnd, b.wEnd) })
	maxWritten := greatestTokens(okByWEnd)
	for _, a := range okByWEnd {
		// The accepted writes that ended before a's began.
		n, _ := slices.BinarySearchFunc(okByWEnd, a.wStart, func(g etcdGrant, t int64) int { return cmp.Compare(g.wEnd, t) })
		if n == 0 {
			continue
		}
		if b := okByWEnd[maxWritten[n-1]]; a.token < b.token {
			out.staleAccepted++
			example("stale write accepted: token %d wrote in [%d, %d] after token %d wrote in [%d, %d]",
				a.token, a.wStart, a.wEnd, b.token, b.wStart, b.wEnd)
		}
	}
	return out
}

// greatestTokens returns, for each i, the index of the greatest token among
// grants[:i+1].
func greatestTokens(grants []etcdGrant) []int {
	out := make([]int, len(grants))
	for i := range grants {
		out[i] = i
		if i > 0 && grants[out[i-1]].token >= grants[i].token {
			out[i] = out[i-1]
		}
	}
	return out
}

// overlapping counts the failures of class whose acquire overlapped one of
// the windows ([from, to], ns).
func overlapping(failures []etcdFailure, class string, windows [][2]int64) int {
	n := 0
	for _, f := range failures {
		if f.class != class {
			continue
		}
		for _, w := range windows {
			if f.start <= w[1] && f.end >= w[0] {
				n++
				break
			}
		}
	}
	return n
}

// etcdWorker is one worker process of TestEtcdTokensUnderChaos.
type etcdWorker struct {
	child *proc.Child
	// holding is set from the worker's "holding" line to its "grant" line:
	// it holds a grant whose write has not returned, as far as the test
	// has read its output.
	holding atomic.Bool
}

// etcdTally collects what the etcd workers reported.
type etcdTally struct {
	mu       sync.Mutex
	grants   []etcdGrant
	failures []etcdFailure
	bad      []string // lines that did not parse
}

// read reads w's output until it ends.
func (ty *etcdTally) read(w *etcdWorker) {
	for l := range w.child.Lines() {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "holding" {
			w.holding.Store(true)
			continue
		}
		ty.mu.Lock()
		switch {
		case len(f) > 0 && f[0] == "grant":
			w.holding.Store(false)
			g, err := parseEtcdGrant(l)
			if err != nil {
				ty.bad = append(ty.bad, err.Error())
			} else {
				ty.grants = append(ty.grants, g)
			}
		case len(f) > 0 && f[0] == "error":
			e, err := parseEtcdFailure(l)
			if err != nil {
				ty.bad = append(ty.bad, err.Error())
			} else {
				ty.failures = append(ty.failures, e)
			}
		default:
			ty.bad = append(ty.bad, l)
		}
		ty.mu.Unlock()
	}
}

// watchRegister reads the register's token for resource again and again
// until ctx ends, and returns the tokens it saw, each change once.
func watchRegister(ctx context.Context, r *correctness.Register, resource string) []uint64 {
	var seen []uint64
	for ctx.Err() == nil {
		if _, token, err := r.Read(ctx, resource); err == nil && token != 0 &&
			(len(seen) == 0 || seen[len(seen)-1] != token) {
			seen = append(seen, token)
		}
		time.Sleep(time.Millisecond)
	}
	return seen
}

// TestEtcdTokensUnderChaos proves that fencing tokens drawn from etcd
// (etcdtokens) keep a fenced resource safe when the lock itself is not:
// four worker processes take one correctness lock, whose tokens come from a
// 3-member etcd cluster, and write a Register on a Redis of its own with
// each grant's token. For LEASEKIT_CHAOS (default 8s) a nemesis freezes
// workers past their ttl (SIGSTOP, SIGCONT) and kills them with -9 (and
// starts new ones), half the time picking, if it finds one within 200ms, a
// worker that has been granted the lock and not yet written; then, as long
// again, it also restarts the lock's Redis, in turn without persistence
// (every grant forgotten) and from a snapshot taken up to 300ms before (the
// latest grants forgotten): two workers may then hold the lock at once. And
// it kills the etcd leader and restarts it 200 to 500ms later, never two
// members down at once.
//
// From the workers' reports of when each acquire and write began and
// ended, and from the register's token as the test reads it meanwhile, it
// counts token inversions, duplicate tokens, register tokens going down and
// stale writes accepted (checkEtcdHistory): there must be none. It asserts
// nothing about time: only those counts, and that work was done.
func TestEtcdTokensUnderChaos(t *testing.T) {
	d := 8 * time.Second
	if v := os.Getenv("LEASEKIT_CHAOS"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("LEASEKIT_CHAOS=%q: %v", v, err)
		}
	}
	cluster := etcdtest.Start(t, 3)
	lockServer := redistest.Start(t)
	resourceServer := redistest.Start(t)
	admin := lockServer.Client(t)
	const name, ttl, workers = "etcd-chaos", 300 * time.Millisecond, 4
	ty := &etcdTally{}
	var readers sync.WaitGroup
	env := fmt.Sprintf("%s=%s %s %s %s %s", etcdWorkerEnv, lockServer.Addr, resourceServer.Addr, name, ttl,
		strings.Join(cluster.Endpoints(), ","))
	start := func() *etcdWorker {
		w := &etcdWorker{child: proc.Start(t, "etcd", env)}
		readers.Go(func() { ty.read(w) })
		return w
	}
	procs := make([]*etcdWorker, workers)
	for i := range procs {
		procs[i] = start()
	}
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	watched := make(chan []uint64, 1)
	register := correctness.NewRegister(resourceServer.Client(t))
	go func() { watched <- watchRegister(watchCtx, register, etcdResource) }()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	ms := func(lo, n int) time.Duration { return time.Duration(lo+rng.IntN(n)) * time.Millisecond }
	// victim picks a worker: half the time one that has been granted the
	// lock and not yet written, as far as its output tells, waiting up to
	// 200ms for one; else any.
	victim := func() (i int, holder bool) {
		if rng.IntN(2) == 0 {
			for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				for i, w := range procs {
					if w.holding.Load() {
						return i, true
					}
				}
			}
		}
		return rng.IntN(workers), false
	}
	var faults struct {
		pauses, holderPauses, kills, holderKills int
		emptyRestarts, snapshotRestarts          int
		leaderKills                              int
	}
	var losses [][2]int64 // when an etcd leader was killed, to when it was back
	began := time.Now()
	end, faultsFrom := began.Add(2*d), began.Add(d)
	nextRestart, nextLeaderKill := faultsFrom, faultsFrom.Add(ms(200, 600))
	down, upAt := -1, time.Time{} // the member down, and when it restarts
	for time.Now().Before(end) {
		time.Sleep(ms(20, 150))
		switch now := time.Now(); {
		case down >= 0 && now.After(upAt):
			cluster.Restart(t, down)
			losses[len(losses)-1][1] = time.Now().UnixNano()
			down = -1
			nextLeaderKill = time.Now().Add(ms(500, 1000))
		case now.After(nextRestart):
			if (faults.emptyRestarts+faults.snapshotRestarts)%2 == 0 {
				restartEmpty(t, lockServer, admin)
				faults.emptyRestarts++
			} else {
				restartFromSnapshot(t, lockServer, admin, ms(0, 300))
				faults.snapshotRestarts++
			}
			nextRestart = time.Now().Add(ms(500, 1000))
		case down < 0 && now.After(nextLeaderKill):
			down = cluster.Leader(t)
			losses = append(losses, [2]int64{time.Now().UnixNano(), 0})
			cluster.Kill(t, down)
			faults.leaderKills++
			upAt = time.Now().Add(ms(200, 500))
		case rng.IntN(4) == 0:
			i, holder := victim()
			procs[i].child.Kill()
			procs[i] = start()
			faults.kills++
			if holder {
				faults.holderKills++
			}
		default:
			// Frozen past the ttl: whatever it held, or was about to
			// be handed, it has lost by the time it resumes.
			i, holder := victim()
			procs[i].child.Stop()
			time.Sleep(ttl + ms(50, 300))
			procs[i].child.Continue()
			faults.pauses++
			if holder {
				faults.holderPauses++
			}
		}
	}
	if down >= 0 {
		losses[len(losses)-1][1] = time.Now().UnixNano()
	}
	for _, w := range procs {
		w.child.Kill()
	}
	readers.Wait()
	stopWatch()
	stored := <-watched
	elapsed := time.Since(began)

	var ok, stale, failed int
	for _, g := range ty.grants {
		switch g.result {
		case "ok":
			ok++
		case "stale":
			stale++
		default:
			failed++
		}
	}
	classes := map[string]int{}
	for _, e := range ty.failures {
		classes[e.class]++
	}
	found := checkEtcdHistory(ty.grants, stored)
	t.Logf("%v of chaos: grants: %d; writes accepted: %d; refused as stale: %d; failed: %d; register tokens seen: %d",
		elapsed.Round(time.Millisecond), len(ty.grants), ok, stale, failed, len(stored))
	t.Logf("failed acquires: %d %v; notoken while a killed etcd leader was down: %d",
		len(ty.failures), classes, overlapping(ty.failures, "notoken", losses))
	t.Logf("faults: %d pauses (%d of a holder before its write); %d kills -9 (%d of such a holder); "+
		"lock Redis restarts: %d without persistence, %d from a snapshot; etcd leader kills: %d",
		faults.pauses, faults.holderPauses, faults.kills, faults.holderKills, faults.emptyRestarts, faults.snapshotRestarts, faults.leaderKills)
	t.Logf("token inversions: %d; duplicate tokens: %d; register tokens going down: %d; stale writes accepted: %d",
		found.inversions, found.duplicates, found.storedDown, found.staleAccepted)
	if len(ty.bad) > 0 {
		t.Errorf("%d lines of the workers were not reports: %q", len(ty.bad), ty.bad[:min(len(ty.bad), 10)])
	}
	if found.inversions+found.duplicates+found.storedDown+found.staleAccepted > 0 {
		t.Errorf("token inversions: %d; duplicate tokens: %d; register tokens going down: %d; stale writes accepted: %d; want 0 of each:\n%s",
			found.inversions, found.duplicates, found.storedDown, found.staleAccepted, strings.Join(found.examples, "\n"))
	}
	if ok < 20 {
		t.Errorf("only %d grants wrote ok: the test proved little", ok)
	}
	if faults.leaderKills == 0 || faults.emptyRestarts == 0 || faults.snapshotRestarts == 0 {
		t.Errorf("etcd leader kills: %d; lock Redis restarts: %d without persistence, %d from a snapshot; want some of each: LEASEKIT_CHAOS=%v is too short",
			faults.leaderKills, faults.emptyRestarts, faults.snapshotRestarts, d)
	}
}

// restartMarker is a key of the lock's Redis that tells which kind of
// restart the server came back from.
const restartMarker = "etcd-chaos:restart-marker"

// restartEmpty restarts s without persistence: it removes the snapshot that
// an earlier restartFromSnapshot left, so that the server starts empty.
func restartEmpty(t *testing.T, s *redistest.Server, admin *redis.Client) {
	t.Helper()
	if err := os.Remove(filepath.Join(s.Dir, "dump.rdb")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(t.Context(), restartMarker).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("after a restart without persistence: GET %s: %v, want redis.Nil", restartMarker, err)
	}
}

// restartFromSnapshot snapshots s (SAVE), lets it run on for after, and
// restarts it: it loads the snapshot, and forgets what came after it.
func restartFromSnapshot(t *testing.T, s *redistest.Server, admin *redis.Client, after time.Duration) {
	t.Helper()
	ctx := t.Context()
	mark := strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := admin.Set(ctx, restartMarker, mark, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Del(ctx, restartMarker).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(after)
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := admin.Get(ctx, restartMarker).Result(); err != nil || got != mark {
		t.Fatalf("after a restart from a snapshot: GET %s: %q, %v; want %q", restartMarker, got, err, mark)
	}
	if err := admin.Del(ctx, restartMarker).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdHistoryChecksCount is the control of TestEtcdTokensUnderChaos's
// checks: a hand-made history with one of each violation must be found to
// have exactly those, and the same history without them, none.
func TestEtcdHistoryChecksCount(t *testing.T) {
	// A acquires token 10, and pauses before its write. B acquires 20 and
	// writes. C, acquired after B returned, gets 15: an inversion, and its
	// write is refused. A wakes and its write is accepted, after B's: a
	// stale write accepted. D's acquire began when B's had not returned
	// (equal times do not order grants), and its token is below B's: no
	// inversion; its write overlapped B's and was accepted: not stale. E
	// gets B's token, its acquire overlapping B's and D's: a duplicate, and
	// no inversion. The register is seen to hold 20, then 12: a token going
	// down.
	history := []etcdGrant{
		{token: 10, acqStart: 0, acqEnd: 10, wStart: 50, wEnd: 60, result: "ok"},     // A
		{token: 20, acqStart: 20, acqEnd: 30, wStart: 31, wEnd: 35, result: "ok"},    // B
		{token: 15, acqStart: 40, acqEnd: 45, wStart: 46, wEnd: 47, result: "stale"}, // C
		{token: 12, acqStart: 30, acqEnd: 33, wStart: 35, wEnd: 36, result: "ok"},    // D
		{token: 20, acqStart: 25, acqEnd: 31, wStart: 32, wEnd: 34, result: "error"}, // E
	}
	stored := []uint64{20, 12}
	got := checkEtcdHistory(history, stored)
	t.Logf("found:\n%s", strings.Join(got.examples, "\n"))
	if got.inversions != 1 || got.duplicates != 1 || got.storedDown != 1 || got.staleAccepted != 1 {
		t.Errorf("token inversions: %d; duplicates: %d; stored going down: %d; stale writes accepted: %d; want 1 of each",
			got.inversions, got.duplicates, got.storedDown, got.staleAccepted)
	}

	// Without them: C draws 25, E 21, A's write is refused, and the
	// register is seen to hold 12, then 20.
	history[2].token, history[4].token, history[0].result = 25, 21, "stale"
	stored = []uint64{12, 20}
	if got := checkEtcdHistory(history, stored); got.inversions+got.duplicates+got.storedDown+got.staleAccepted != 0 {
		t.Errorf("a sound history: %+v; want no violation", got)
	}

	for _, line := range []string{"grant 7 1 2 3 4 ok", "grant 7 1 2 3 4 maybe", "grant 7 1 2 3 ok"} {
		_, err := parseEtcdGrant(line)
		if want := line == "grant 7 1 2 3 4 ok"; (err == nil) != want {
			t.Errorf("parseEtcdGrant(%q): %v; want it parsed: %v", line, err, want)
		}
	}
	for _, line := range []string{"error notoken 1 2", "error notoken 1", "error notoken 1 x"} {
		_, err := parseEtcdFailure(line)
		if want := line == "error notoken 1 2"; (err == nil) != want {
			t.Errorf("parseEtcdFailure(%q): %v; want it parsed: %v", line, err, want)
		}
	}
	failures := []etcdFailure{{"notoken", 0, 5}, {"notoken", 12, 14}, {"late", 10, 20}, {"notoken", 21, 30}}
	if got := overlapping(failures, "notoken", [][2]int64{{5, 8}, {14, 20}}); got != 2 {
		t.Errorf("notoken failures overlapping [5, 8] and [14, 20]: %d, want 2", got)
	}
}

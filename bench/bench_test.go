package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// testStagger spaces convoy-procs's arrivals in the tests: wide enough that a
// cold worker, dialling under -race beside the rest of the suite, arrives
// before the parent releases the lock, so every first acquire queues.
const testStagger = 10 * time.Millisecond

func TestMain(m *testing.M) {
	// The bench re-executes itself as convoy-procs workers and spinners: in
	// a test, that is this test binary.
	if role, ok := os.LookupEnv(roleEnv); ok {
		os.Exit(runRole(role))
	}
	os.Exit(redistest.Main(m))
}

// TestQuickRun runs the command's code as `go run ./bench -quick` would, on its
// in-process miniredis, and checks that every scenario produced a row for
// every library and reference, and that nothing of leasekit's failed or
// overlapped. A peer's failures are its row's to report (rueidislock's
// waiters, say, give up on a loaded machine: each of its commands has a
// 20 ms timeout), not this test's to fail on. It checks no timings.
func TestQuickRun(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "chart.svg")
	res := runBench(t, "-quick", "-json", "-chart", chart, "-procs", "2")
	printed := res.printed(t)
	if len(printed) != len(res.rows) {
		t.Fatalf("JSON lines: got %d, want %d (one per row)", len(printed), len(res.rows))
	}
	checkQuickSubjects(t, printed)
	for _, r := range printed {
		checkQuickRow(t, r)
	}
	if !strings.Contains(res.stderr, "miniredis") {
		t.Errorf("the output does not say that it ran on miniredis; stderr:\n%s", res.stderr)
	}
	if st, err := os.Stat(chart); err != nil || st.Size() == 0 {
		t.Errorf("chart: got %v, want a non-empty file", err)
	}
	if !strings.Contains(res.stderr, "no etcd rows") || !strings.Contains(res.stderr, "bash .ci/bench.sh") {
		t.Errorf("the run does not say how to get the etcd rows; stderr:\n%s", res.stderr)
	}
}

// checkQuickSubjects checks that a quick run on miniredis has a row of
// measured ops for every library and reference of every scenario.
func checkQuickSubjects(t *testing.T, rows []row) {
	t.Helper()
	libs := slices.DeleteFunc(libraryNames(), needsEtcd)
	want := map[string][]string{
		"ping":               {"PING", "PING after idle", "PUBLISH after idle"},
		"uncontended":        append([]string{"2×PING"}, libs...),
		"convoy-8":           libs,
		"convoy-64":          libs,
		"convoy-procs":       warmAndCold(libs...),
		firstAcquireScenario: warmAndCold("efficiency", "correctness"),
		"keys-parallel":      append([]string{"SET"}, libs...),
	}
	got := make(map[string][]string)
	for _, r := range rows {
		got[r.Scenario] = append(got[r.Scenario], r.Lib)
		if r.N == 0 {
			t.Errorf("%s/%s: got n 0, want a row of measured ops", r.Scenario, r.Lib)
		}
	}
	for scenario, subjects := range want {
		if !slices.Equal(got[scenario], subjects) {
			t.Errorf("%s: got rows %q, want %q", scenario, got[scenario], subjects)
		}
	}
}

// checkQuickRow checks a row of a quick run on miniredis: none of
// leasekit's failed or overlapped, every one measured what its scenario
// measures, and convoy-procs has no ordering runs.
func checkQuickRow(t *testing.T, r row) {
	t.Helper()
	if r.Scenario == "convoy-procs" && (r.OutOfOrder != nil || r.OutOfQueueOrder != nil) {
		t.Errorf("convoy-procs/%s: got out of order %v, out of queue order %v; want neither: miniredis has no MONITOR",
			r.Lib, r.OutOfOrder, r.OutOfQueueOrder)
	}
	if !leasekitOrRef(r) {
		return
	}
	if r.Failures != 0 || r.Overlaps != 0 {
		t.Errorf("%s/%s: got %d failures, %d overlaps, want none", r.Scenario, r.Lib, r.Failures, r.Overlaps)
	}
	if r.P50 <= 0 {
		t.Errorf("%s/%s: got p50 %dns, want it positive", r.Scenario, r.Lib, r.P50)
	}
	if !r.Reference && !strings.Contains(r.Config, r.Lib) {
		t.Errorf("%s/%s: config %q does not state the library's configuration", r.Scenario, r.Lib, r.Config)
	}
	switch {
	case r.Scenario == "convoy-procs" && (r.Makespan <= 0 || r.IdealNs <= 0 || r.Acquired != 8 || r.Cold != (r.ToWarm > 0)):
		t.Errorf("convoy-procs/%s: got makespan %d, ideal %d, acquired %d, cold %v, ÷ warm %.2f; want two positive durations, 8, and a ratio to warm for a cold row",
			r.Lib, r.Makespan, r.IdealNs, r.Acquired, r.Cold, r.ToWarm)
	case r.Scenario == firstAcquireScenario:
		checkPhases(t, r, 2, "")
	case strings.HasPrefix(r.Scenario, "convoy-") && r.Scenario != "convoy-procs" && (r.Makespan <= 0 || r.IdealNs <= 0 || r.HandoffP50 <= 0 || r.HandoffPublishes <= 0):
		t.Errorf("%s/%s: got makespan %d, ideal %d, handoff p50 %d (%.1f PUBLISHes), want all positive",
			r.Scenario, r.Lib, r.Makespan, r.IdealNs, r.HandoffP50, r.HandoffPublishes)
	}
}

// TestQuickRunOnRealServer runs the scenarios with costs, convoy-procs with
// two worker processes among them, against a real server, as `bash
// .ci/bench.sh -quick` would: every row has its cost fields, no
// convoy-procs contender overlapped another and none of leasekit's failed,
// the ordering run placed every grant by the server's order (and leasekit's
// by its queue too, with none out of the queue's order), and the run leaves
// nothing behind (not the references' keys, which have no ttl, nor
// leasekit's fence counters, which never expire).
func TestQuickRunOnRealServer(t *testing.T) {
	b := redistest.Real(t)
	res := runBench(t, "-quick", "-json", "-addr", b.Server.Addr, "-scenarios", "uncontended,convoy-procs,keys-parallel", "-procs", "2")
	stderr := res.stderr
	procs := 0
	for _, r := range res.printed(t) {
		switch r.Scenario {
		case firstAcquireScenario:
			checkPhases(t, r, 2, stderr)
		case "convoy-procs":
			procs++
			// A peer may lose a waiter (rueidislock's waiters have no timer
			// with client-side caching on, so one that misses an invalidation
			// sleeps until its context ends): the bench reports that as a
			// failure, and only leasekit's own must have none.
			wantFailures := r.Failures
			if isLeasekit(r.Lib) {
				wantFailures = 0
			}
			if r.Procs != 2 || r.Contenders != 4 || r.Acquired+r.Failures != 8 || r.Failures != wantFailures || r.Overlaps != 0 {
				t.Errorf("convoy-procs/%s: got procs %d, contenders %d, acquired %d, failures %d, overlaps %d; want 2, 4, 8 in all, %d failures, 0 overlaps; stderr:\n%s",
					r.Lib, r.Procs, r.Contenders, r.Acquired, r.Failures, r.Overlaps, wantFailures, stderr)
			}
			if r.ServerCallsPerAcq == nil || *r.ServerCallsPerAcq <= 0 || r.ServerUsecPerAcq == nil || *r.ServerUsecPerAcq <= 0 ||
				r.Makespan <= 0 || r.IdealNs <= 0 || r.HandoffP50 <= 0 || r.WaitP99 <= 0 {
				t.Errorf("convoy-procs/%s: a field is missing: %+v", r.Lib, r)
			}
			if r.Cold != (r.MadeP50 > 0) || r.MadeP50 > r.Makespan {
				t.Errorf("convoy-procs/%s, %s: made p50 %v, makespan %v; want it within the makespan of a cold row only",
					r.Lib, startName(r.Cold), time.Duration(r.MadeP50), time.Duration(r.Makespan))
			}
			checkOrder(t, r, 8, stderr)
		default:
			if r.ClientCPUPerOp == nil || *r.ClientCPUPerOp <= 0 || r.ServerUsecPerOp == nil || *r.ServerUsecPerOp <= 0 ||
				r.ServerCallsPerOp == nil || *r.ServerCallsPerOp <= 0 {
				t.Errorf("%s/%s: a cost is missing: %+v", r.Scenario, r.Lib, r)
			}
		}
	}
	if procs != 2*len(slices.DeleteFunc(libraryNames(), needsEtcd)) {
		t.Errorf("convoy-procs rows: got %d, want two per library (warm, cold)", procs)
	}
	if keys := b.Client.Keys(t.Context(), "*").Val(); len(keys) != 0 {
		t.Fatalf("the run left %d keys, among them %q; stderr:\n%s", len(keys), keys[:min(len(keys), 5)], stderr)
	}
	if !strings.Contains(stderr, "deleted the") {
		t.Errorf("the run did not say what it deleted; stderr:\n%s", stderr)
	}
}

// TestClusterConvoyProcs runs convoy-procs for both kinds of lock on a
// three-master cluster, with four worker processes: their waiters queue on
// sharded grant channels, so every grant comes in the order the server
// queued the waiters (out of queue order 0), none fails and no two overlap.
// Grants out of the order of the contenders' first commands are logged, not
// failed: a waiter queues a round trip after its first command, and on a
// loaded machine another can queue in between.
func TestClusterConvoyProcs(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr
	}
	res := runBench(t, "-quick", "-json", "-cluster", strings.Join(addrs, ","), "-scenarios", "convoy-procs",
		"-procs", "4", "-libs", "efficiency,correctness")
	rows, stderr := res.printed(t), res.stderr
	if len(rows) != 8 {
		t.Fatalf("got %d rows, want four per library (warm and cold, and their first acquires); stderr:\n%s", len(rows), stderr)
	}
	for _, r := range rows {
		if r.Scenario == firstAcquireScenario {
			continue // checked on one server (TestQuickRunOnRealServer)
		}
		if r.Procs != 4 || r.Acquired != 16 || r.Failures != 0 || r.Overlaps != 0 {
			t.Errorf("%s: got procs %d, acquired %d, failures %d, overlaps %d; want 4, 16, 0, 0; stderr:\n%s",
				r.Lib, r.Procs, r.Acquired, r.Failures, r.Overlaps, stderr)
		}
		checkOrder(t, r, 16, stderr)
	}
}

// checkOrder checks a convoy-procs row's ordering run, of n grants: the
// server placed every grant's arrival, and every one of leasekit's in its
// wait queue, none out of the queue's order.
func checkOrder(t *testing.T, r row, n int, stderr string) {
	t.Helper()
	if r.OutOfOrder == nil || (r.Arrived != n && leasekitOrRef(r)) {
		t.Errorf("convoy-procs/%s, %s: got out of order %s of %d arrivals placed, want a count of %d; stderr:\n%s",
			r.Lib, startName(r.Cold), fmtOf(r.OutOfOrder, r.Arrived), r.Arrived, n, stderr)
		return
	}
	t.Logf("convoy-procs/%s, %s: %d of %d grants out of the order of arrival", r.Lib, startName(r.Cold), *r.OutOfOrder, r.Arrived)
	if !leasekitOrRef(r) {
		return
	}
	// A cold worker's first contender may not have queued yet when the
	// parent reads the queue: its set-up can outlast the arrivals.
	if queued := r.Queued == n || r.Cold && r.Queued > 0 && r.Queued <= n; r.OutOfQueueOrder == nil || !queued || *r.OutOfQueueOrder != 0 {
		t.Errorf("convoy-procs/%s, %s: got %s grants out of the queue's order, of %d found in the queue; want 0 of %d; stderr:\n%s",
			r.Lib, startName(r.Cold), fmtOf(r.OutOfQueueOrder, r.Queued), r.Queued, n, stderr)
	}
}

// checkPhases checks a row of convoy-procs's first acquires, of procs
// workers: each stamped its first attempt; a warm one also its queueing
// (the parent holds the lock while they arrive). A cold one's other
// phases are counted but not required: in a cold convoy every contender
// of every worker arrives at once on a free lock, so a worker's first
// contender may take it at its first attempt (it neither subscribes nor
// queues), and a sibling may have dialled the connection, or started the
// subscription, that it then uses; any number of them, none included,
// may show each phase, and none may have been handed the lock.
func checkPhases(t *testing.T, r row, procs int, stderr string) {
	t.Helper()
	want := map[string]int{"dial": 0, "first attempt": procs, "subscribe": 0, "queue": procs}
	for _, p := range r.Phases {
		short := want[p.Name] - p.Of
		if r.Cold && p.Name != "first attempt" {
			short = 0 // any number (see above)
		}
		if short != 0 || p.Of < 0 || p.Of > procs || p.Of > 0 && (p.Start <= 0 || p.End < p.Start) {
			t.Errorf("%s/%s, %s: phase %s: got %d of %d workers, %d–%d ns; want %d, and a span; stderr:\n%s",
				r.Scenario, r.Lib, startName(r.Cold), p.Name, p.Of, r.N, p.Start, p.End, want[p.Name], stderr)
		}
	}
	if r.N != procs || len(r.Phases) != len(phaseNames) || r.HandoffP50 <= 0 && !r.Cold || r.HandoffP50 < 0 {
		t.Errorf("%s/%s, %s: got %d workers, %d phases, handoff %dns; want %d, %d and a handoff (warm)",
			r.Scenario, r.Lib, startName(r.Cold), r.N, len(r.Phases), r.HandoffP50, procs, len(phaseNames))
	}
}

// warmAndCold is each of libs twice, as convoy-procs's rows name them.
func warmAndCold(libs ...string) []string {
	var out []string
	for _, l := range libs {
		out = append(out, l, l)
	}
	return out
}

// leasekitOrRef reports whether r is a row of leasekit's locks or of a
// reference.
func leasekitOrRef(r row) bool {
	return r.Reference || isLeasekit(r.Lib)
}

// benchRun is what a run of the bench returned and wrote.
type benchRun struct {
	rows           []row
	stdout, stderr string
}

// runBench runs the command's code as `go run ./bench args...` would, with
// convoy-procs's arrivals testStagger apart, and fails the test if it
// fails. It runs without etcd, whatever LEASEKIT_ETCD_ENDPOINTS says,
// unless args give -etcd.
func runBench(t *testing.T, args ...string) benchRun {
	t.Helper()
	cfg, err := parseFlags(append([]string{"-etcd="}, args...), io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	cfg.stagger = testStagger
	var stdout, stderr bytes.Buffer
	rows, err := run(t.Context(), cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	return benchRun{rows: rows, stdout: stdout.String(), stderr: stderr.String()}
}

// printed is the rows the run wrote as JSON lines (-json).
func (r benchRun) printed(t *testing.T) []row {
	t.Helper()
	return decodeRows(t, strings.NewReader(r.stdout))
}

func decodeRows(t *testing.T, r io.Reader) []row {
	t.Helper()
	var rows []row
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q is not a JSON row: %v", sc.Text(), err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestTableOutput checks the table form: a header naming the backend and each
// library's configuration, then one table per scenario.
func TestTableOutput(t *testing.T) {
	out := runBench(t, "-quick", "-scenarios", "uncontended,convoy-8", "-contenders", "8", "-libs", "efficiency,redislock").stdout
	for _, want := range []string{"miniredis", "efficiency.New(client)", "LinearBackoff(10ms)", "\nuncontended\n", "\nconvoy-8\n", "2×PING (ref)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"redsync", "correctness", "\nkeys-parallel\n", "\nconvoy-64\n"} {
		if strings.Contains(out, absent) {
			t.Errorf("output mentions %q, which was not asked for:\n%s", absent, out)
		}
	}
}

// TestRTT runs convoy-procs with -rtt, through the proxy that holds every
// reply: the workers reach the server through it too, and the header says
// so.
func TestRTT(t *testing.T) {
	b := redistest.Real(t)
	res := runBench(t, "-quick", "-json", "-addr", b.Server.Addr, "-rtt", "1ms", "-scenarios", "convoy-procs",
		"-procs", "2", "-libs", "efficiency")
	stderr := res.stderr
	for _, r := range res.printed(t) {
		if r.Scenario == "convoy-procs" && (r.Acquired != 8 || r.Failures != 0 || r.Overlaps != 0) {
			t.Errorf("%s, %s: got acquired %d, failures %d, overlaps %d; want 8, 0, 0; stderr:\n%s",
				r.Lib, startName(r.Cold), r.Acquired, r.Failures, r.Overlaps, stderr)
		}
	}
	if !strings.Contains(stderr, "-rtt 1ms: every client reached the server through a proxy") {
		t.Errorf("the header does not say that a proxy held the replies; stderr:\n%s", stderr)
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // part of the error; "" for none
	}{
		{"defaults", nil, ""},
		{"quick", []string{"-quick"}, ""},
		{"unknown library", []string{"-libs", "efficiency,zookeeper"}, `unknown library "zookeeper"`},
		{"bad contenders", []string{"-contenders", "8,0"}, `"0" is not a positive count`},
		{"bad chart", []string{"-chart", "out.jpg"}, "neither .png nor .svg"},
		{"addr and url", []string{"-addr", "127.0.0.1:1", "-url", "redis://127.0.0.1:1"}, "one of -addr, -url and -cluster"},
		{"addr and cluster", []string{"-addr", "127.0.0.1:1", "-cluster", "127.0.0.1:2"}, "one of -addr, -url and -cluster"},
		{"bad procs", []string{"-procs", "0"}, "-procs"},
		{"bad per-proc", []string{"-per-proc", "0"}, "-per-proc"},
		{"negative n", []string{"-n", "-3"}, "not positive"},
		{"negative rtt", []string{"-rtt", "-1ms"}, "-rtt"},
		{"rtt and cluster", []string{"-rtt", "1ms", "-cluster", "127.0.0.1:2"}, "-rtt needs -addr"},
		{"rtt and etcd", []string{"-rtt", "1ms", "-etcd", "127.0.0.1:2"}, "not etcd's"},
		{"etcd library without etcd", []string{"-etcd=", "-libs", "correctness,etcd-mutex"}, "etcd-mutex needs -etcd"},
		{"stray argument", []string{"uncontended"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := parseFlags([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: got %v, want flag.ErrHelp", err)
	}
}

func TestUnknownScenario(t *testing.T) {
	_, err := selectScenarios([]string{"ping", "convoy-9"}, []int{8, 64})
	if err == nil || !strings.Contains(err.Error(), `"convoy-9"`) {
		t.Fatalf("got %v, want an error naming convoy-9", err)
	}
}

// benchSubjects opens every library on client, as the command does, and
// returns them as subjects after the given reference.
func benchSubjects(tb testing.TB, client *redis.Client, ref func(b *bench) subject) []subject {
	t := &target{client: client, addrs: []string{client.Options().Addr}, sent: newSentCounter()}
	if strings.Contains(tb.Name(), "miniredis") {
		t.noTracking = true
	}
	b := &bench{cfg: config{ttl: defaultTTL}, target: t, client: client}
	tb.Cleanup(b.closeLibs)
	for _, lib := range libraries {
		if lib.etcd {
			continue // TestEtcdRows
		}
		l, err := lib.open(t, client, defaultTTL)
		if err != nil {
			tb.Fatalf("%s: %v", lib.name, err)
		}
		b.libs = append(b.libs, openLib{name: lib.name, lib: lib, l: l})
	}
	return b.lockSubjects("uncontended", ref(b))
}

// backends runs fn on miniredis and on a real redis-server (skipped without
// the binary), as sub-benchmarks named after the backend.
func backends(b *testing.B, fn func(b *testing.B, client *redis.Client)) {
	b.Run("miniredis", func(b *testing.B) { fn(b, redistest.Mini(b).Client) })
	b.Run("redis-server", func(b *testing.B) { fn(b, redistest.Real(b).Client) })
}

// BenchmarkUncontended is the uncontended scenario as a Go benchmark: one
// acquire + release of a free key per op, with each library's waiting acquire.
func BenchmarkUncontended(b *testing.B) {
	backends(b, func(b *testing.B, client *redis.Client) {
		ref := func(bn *bench) subject { return bn.pingSubject("2×PING", 2) }
		for _, s := range benchSubjects(b, client, ref) {
			b.Run(s.name, func(b *testing.B) {
				ctx := context.Background()
				key := "bench:go-uncontended:" + s.name
				for range 10 { // an untimed warm-up, as in the command
					if err := s.op(ctx, key); err != nil {
						b.Fatalf("warm-up: %v", err)
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := s.op(ctx, key); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
}

// BenchmarkKeysParallel is keys-parallel as a Go benchmark: every goroutine
// acquires and releases a key of its own.
func BenchmarkKeysParallel(b *testing.B) {
	backends(b, func(b *testing.B, client *redis.Client) {
		for _, s := range benchSubjects(b, client, (*bench).setSubject) {
			b.Run(s.name, func(b *testing.B) {
				var worker atomic.Int64
				b.SetParallelism(max(keysParallelWorkers/runtime.GOMAXPROCS(0), 1))
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					key := "bench:go-keys-parallel:" + s.name + ":" + strconv.FormatInt(worker.Add(1), 10)
					for pb.Next() {
						if err := s.op(ctx, key); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	})
}

func TestParseMonitorLine(t *testing.T) {
	tests := []struct {
		name, line string
		want       monitored
		ok         bool
	}{
		{"client", `1796140510.325479 [0 127.0.0.1:49620] "evalsha" "9ae0" "1" "k" "v"`,
			monitored{client: "127.0.0.1:49620", args: []string{"evalsha", "9ae0", "1", "k", "v"}}, true},
		{"script", `1796140510.325598 [0 lua] "SET" "k" "v"`, monitored{client: "lua", args: []string{"SET", "k", "v"}}, true},
		{"escapes", `1.5 [3 [::1]:6379] "set" "a b" "q\"\\" "\x00\xff\n\r\t\a\b"`,
			monitored{client: "[::1]:6379", args: []string{"set", "a b", `q"\`, "\x00\xff\n\r\t\a\b"}}, true},
		{"no header", `OK`, monitored{}, false},
		{"unterminated", `1.5 [0 lua] "set" "a`, monitored{}, false},
		{"bad escape", `1.5 [0 lua] "\xZZ"`, monitored{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseMonitorLine(tt.line)
			if ok != tt.ok || (ok && (got.client != tt.want.client || !slices.Equal(got.args, tt.want.args))) {
				t.Fatalf("got %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestOutOfOrder(t *testing.T) {
	tests := []struct {
		name           string
		byGrant        []int
		wantOut, known int
	}{
		{"in order", []int{0, 1, 2, 3}, 0, 4},
		{"one overtakes", []int{1, 0, 2, 3}, 1, 4},
		{"last first", []int{3, 0, 1, 2}, 1, 4},
		{"reversed", []int{3, 2, 1, 0}, 3, 4},
		{"unknown ranks skipped", []int{-1, 2, -1, 1}, 1, 2},
		{"none", nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if out, known := outOfOrder(tt.byGrant); out != tt.wantOut || known != tt.known {
				t.Fatalf("got %d of %d, want %d of %d", out, known, tt.wantOut, tt.known)
			}
		})
	}
}

// TestArrivalRanks ranks contenders by where the server ran their first
// commands; places on two nodes do not compare.
func TestArrivalRanks(t *testing.T) {
	cmd := func(args ...string) [][]byte {
		var out [][]byte
		for _, a := range args {
			out = append(out, []byte(a))
		}
		return out
	}
	cs := []procContender{{First: cmd("SET", "k", "a")}, {First: cmd("set", "k", "b")}, {First: cmd("set", "k", "c")}, {}}
	arrivals := map[string]arrival{
		commandKey([]string{"set", "k", "a"}): {place: 7},
		commandKey([]string{"SET", "k", "b"}): {place: 3},
	}
	if got, want := arrivalRanks(cs, arrivals), []int{7, 3, -1, -1}; !slices.Equal(got, want) {
		t.Errorf("one node: got %v, want %v", got, want)
	}
	arrivals[commandKey([]string{"set", "k", "c"})] = arrival{node: 1, place: 1}
	if got, want := arrivalRanks(cs, arrivals), []int{-1, -1, -1, -1}; !slices.Equal(got, want) {
		t.Errorf("two nodes: got %v, want %v", got, want)
	}
	if got, want := queueRanks(cs, []string{"c", "x", "a"}), []int{2, -1, 0, -1}; !slices.Equal(got, want) {
		t.Errorf("queue: got %v, want %v", got, want)
	}
}

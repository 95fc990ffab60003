package gocronlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/cron/gocronlock"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// electorWait bounds every wait below: a bound for a hung test, not a
// timing assertion.
const electorWait = 30 * time.Second

var quiet = slog.New(slog.DiscardHandler)

func newElector(t *testing.T, client redis.UniversalClient, name string, opts ...gocronlock.ElectorOption) *gocronlock.Elector {
	t.Helper()
	l := correctness.New(client, correctness.WithLogger(quiet), correctness.WithAudit(false))
	t.Cleanup(func() { _ = l.Close() })
	e, err := gocronlock.NewElector(l, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// awaitTerm waits until e leads (leader) or does not (!leader), and returns
// its term then.
func awaitTerm(t *testing.T, e *gocronlock.Elector, leader bool) uint64 {
	t.Helper()
	for deadline := time.Now().Add(electorWait); ; time.Sleep(time.Millisecond) {
		err := e.IsLeader(t.Context())
		if term := e.Term(); (err == nil) == leader && (term != 0) == leader {
			return term
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Elector did not become leader=%v within %v", leader, electorWait)
		}
	}
}

// TestElectorHandsOver: of two Electors, one leads and the other answers
// ErrNotLeader; closing the leader hands leadership to the other, with a
// higher term; a closed Elector never leads.
func TestElectorHandsOver(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		first := newElector(t, b.Client, "handover")
		termA := awaitTerm(t, first, true)
		second := newElector(t, b.Client, "handover")
		if err := second.IsLeader(t.Context()); !errors.Is(err, gocronlock.ErrNotLeader) || second.Term() != 0 {
			t.Fatalf("the second Elector while the first leads: got %v, term %d, want ErrNotLeader", err, second.Term())
		}
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		if err := first.IsLeader(t.Context()); !errors.Is(err, gocronlock.ErrNotLeader) {
			t.Fatalf("a closed Elector: got %v, want ErrNotLeader", err)
		}
		if termB := awaitTerm(t, second, true); termB <= termA {
			t.Fatalf("the second Elector's term %d, want above %d", termB, termA)
		}
		if err := first.Close(); err != nil {
			t.Fatalf("a second Close: %v", err)
		}
	})
}

// TestElectorStopsWhenUnconfirmed: a leader whose lease cannot be confirmed
// (Redis is gone) stops answering nil by its lease's deadline.
func TestElectorStopsWhenUnconfirmed(t *testing.T) {
	b := redistest.Mini(t)
	e := newElector(t, b.Client, "gone", gocronlock.WithElectorTTL(300*time.Millisecond))
	awaitTerm(t, e, true)
	b.Mini.Close()
	awaitTerm(t, e, false)
}

// TestNewElectorBadInput: bad input is an error from NewElector, before any
// campaign.
func TestNewElectorBadInput(t *testing.T) {
	b := redistest.Mini(t)
	l := correctness.New(b.Client, correctness.WithLogger(quiet), correctness.WithAudit(false))
	defer l.Close()
	cases := []struct {
		name string
		elec string
		opt  gocronlock.ElectorOption
		want error
		says string
	}{
		{"empty name", "", nil, correctness.ErrInvalidKey, "empty"},
		{"zero ttl", "e", gocronlock.WithElectorTTL(0), correctness.ErrInvalidTTL, "0s"},
		{"value over 64 KiB", "e", gocronlock.WithElectorValue(make([]byte, correctness.MaxLeaderValue+1)), nil, "65537 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := gocronlock.NewElector(l, tc.elec, tc.opt)
			if e != nil || err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, %v; want an error matching %v that says %q", e, err, tc.want, tc.says)
			}
		})
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("NewElector(nil, ...) did not panic")
			}
		}()
		_, _ = gocronlock.NewElector(nil, "e")
	}()
}

// schedulerEnv carries "addr name" to a scheduler child.
const schedulerEnv = "LEASEKIT_SCHEDULER"

// schedulerChild runs a gocron scheduler with an Elector, and a job every
// 20 ms that appends "<term> <pid>" to the list <name>:runs, term being the
// Elector's as the run starts. It says "ready" once started, and shuts down
// when it reads a line.
func schedulerChild() int {
	addr, name, _ := strings.Cut(os.Getenv(schedulerEnv), " ")
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	l := correctness.New(client, correctness.WithLogger(quiet), correctness.WithAudit(false))
	defer l.Close()
	e, err := gocronlock.NewElector(l, name, gocronlock.WithElectorTTL(2*time.Second))
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	defer e.Close()
	s, err := gocron.NewScheduler(gocron.WithDistributedElector(e))
	if err == nil {
		_, err = s.NewJob(gocron.DurationJob(20*time.Millisecond), gocron.NewTask(func() {
			client.RPush(context.Background(), name+":runs", fmt.Sprintf("%d %d", e.Term(), os.Getpid()))
		}))
	}
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	s.Start()
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = s.Shutdown()
	return 0
}

// run is one run of the job: the term of the Elector that ran it, and its
// process.
type run struct {
	term uint64
	pid  int
}

func runs(t *testing.T, client *redis.Client, name string) []run {
	t.Helper()
	lines, err := client.LRange(t.Context(), name+":runs", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]run, len(lines))
	for i, l := range lines {
		term, pid, _ := strings.Cut(l, " ")
		out[i].term, _ = strconv.ParseUint(term, 10, 64)
		out[i].pid, _ = strconv.Atoi(pid)
	}
	return out
}

// awaitRuns waits until the job's runs satisfy done, and returns them.
func awaitRuns(t *testing.T, client *redis.Client, name string, done func([]run) bool) []run {
	t.Helper()
	for deadline := time.Now().Add(electorWait); ; time.Sleep(5 * time.Millisecond) {
		if rs := runs(t, client, name); done(rs) {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's runs did not come within %v", electorWait)
		}
	}
}

// TestElectorThreeSchedulers: three scheduler processes share a job through
// an election. Every run happens on the current leader: each run carries
// the term its scheduler led with (never 0, which would be a run on a
// scheduler that does not lead), each term is one process's, and terms never
// go back (a run of an old leader after a new one's). When the leader is
// killed with -9, another scheduler leads with a higher term and runs the
// job.
func TestElectorThreeSchedulers(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		if b.Mini != nil {
			runRedisClock(t, b)
		}
		const name = "schedulers"
		children := map[int]*proc.Child{}
		for range 3 {
			c := proc.Start(t, "scheduler", schedulerEnv+"="+b.Client.Options().Addr+" "+name)
			if line := c.Line(electorWait); line != "ready" {
				t.Fatalf("scheduler said %q", line)
			}
			children[c.Pid()] = c
		}
		first := awaitRuns(t, b.Client, name, func(rs []run) bool { return len(rs) >= 5 })[0]
		leader := children[first.pid]
		if leader == nil {
			t.Fatalf("the first run came from pid %d, not a scheduler", first.pid)
		}
		if err := syscall.Kill(first.pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = leader.Wait()
		delete(children, first.pid)
		var after uint64
		awaitRuns(t, b.Client, name, func(rs []run) bool {
			n := 0
			for _, r := range rs {
				if r.term > first.term {
					after = r.term
					n++
				}
			}
			return n >= 5
		})
		for _, c := range children {
			c.Send("stop")
		}
		for _, c := range children {
			if err := c.Wait(); err != nil {
				t.Fatalf("scheduler %d: %v", c.Pid(), err)
			}
		}
		rs := runs(t, b.Client, name)
		pidOf := map[uint64]int{}
		for i, r := range rs {
			if r.term == 0 {
				t.Fatalf("run %d on pid %d, which did not lead", i, r.pid)
			}
			if i > 0 && r.term < rs[i-1].term {
				t.Fatalf("run %d with term %d after a run with term %d: an old leader ran after a new one", i, r.term, rs[i-1].term)
			}
			if p, ok := pidOf[r.term]; ok && p != r.pid {
				t.Fatalf("term %d ran on pids %d and %d", r.term, p, r.pid)
			}
			pidOf[r.term] = r.pid
		}
		if pidOf[after] == first.pid {
			t.Fatalf("the new leader is the killed process %d", first.pid)
		}
		t.Logf("%d runs over %d terms", len(rs), len(pidOf))
	})
}

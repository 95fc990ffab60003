package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestElectionOnCluster: on a 3-master Redis Cluster, candidates on Lockers
// of their own lead in arrival order, each handed leadership by its
// predecessor's resignation; Leader reads the leader from the lock's master;
// and an observer, whose plain subscription may be on any node, sees every
// leader once, in order, and none after the last.
func TestElectionOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	shared := c.Client(t)
	count := redistest.Count(shared)
	locker := func() *correctness.Locker {
		l := correctness.New(shared, correctness.WithLogger(quiet), correctness.WithAudit(false))
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	observer := correctness.New(c.Client(t), correctness.WithLogger(quiet), correctness.WithAudit(false))
	defer observer.Close()
	for _, name := range []string{"cluster-a", "cluster-b", "cluster-c"} {
		seen, err := observer.Observe(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("%s: first: got %s, want none", name, show(v))
		}
		first := campaign(ctx, locker(), name, time.Minute, "c0")
		term := first.term(t)
		if got, err := observer.Leader(ctx, name); err != nil || got.Term != term || string(got.Value) != "c0" {
			t.Fatalf("%s: Leader: got %s, %v, want \"c0\"@%d", name, show(got), err, term)
		}
		const n = 3
		line := []*candidate{first}
		for i := 1; i < n; i++ {
			tries := count.Of("wait")
			line = append(line, campaign(ctx, locker(), name, time.Minute, fmt.Sprint("c", i)))
			count.Await(t, "wait", tries+1)
		}
		// Each resigns once the observer has seen it: the next takes over
		// by the handoff, with no round trip of its own.
		tries := count.Of("wait")
		last := uint64(0)
		for i, c := range line {
			v := next(t, seen)
			if string(v.Value) != c.value || v.Term <= last {
				t.Fatalf("%s: change %d: got %s, want %s with a term above %d", name, i+1, show(v), c.value, last)
			}
			last = v.Term
			if err := c.end(t); err != nil {
				t.Fatalf("%s: %s: %v", name, c.value, err)
			}
		}
		if got := count.Of("wait"); got != tries {
			t.Fatalf("%s: the candidates made %d wait round trips to take over, want 0: leadership was not handed over", name, got-tries)
		}
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("%s: after the last resigned: got %s, want none", name, show(v))
		}
		if _, err := observer.Leader(ctx, name); !errors.Is(err, correctness.ErrNoLeader) {
			t.Fatalf("%s: Leader after the last resigned: got %v, want ErrNoLeader", name, err)
		}
	}
}

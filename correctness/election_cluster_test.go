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
		done := make([]chan error, n)
		for i := 1; i < n; i++ {
			done[i] = make(chan error, 1)
			l := locker()
			tries := count.Of("wait")
			go func() {
				done[i] <- l.Campaign(ctx, name, time.Minute, fmt.Appendf(nil, "c%d", i), func(context.Context, uint64) error { return nil })
			}()
			count.Await(t, "wait", tries+1)
		}
		tries := count.Of("wait")
		if err := first.end(t); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < n; i++ {
			if err := <-done[i]; err != nil {
				t.Fatalf("%s: c%d: %v", name, i, err)
			}
		}
		if got := count.Of("wait"); got != tries {
			t.Fatalf("%s: the candidates made %d wait round trips to take over, want 0: leadership was not handed over", name, got-tries)
		}
		last := uint64(0)
		for i := range n {
			v := next(t, seen)
			if string(v.Value) != fmt.Sprint("c", i) || v.Term <= last {
				t.Fatalf("%s: change %d: got %s, want c%d with a term above %d", name, i+1, show(v), i, last)
			}
			last = v.Term
		}
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("%s: after the last resigned: got %s, want none", name, show(v))
		}
		if _, err := observer.Leader(ctx, name); !errors.Is(err, correctness.ErrNoLeader) {
			t.Fatalf("%s: Leader after the last resigned: got %v, want ErrNoLeader", name, err)
		}
	}
}

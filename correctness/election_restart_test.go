package correctness_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// observed collects an observer's changes up to and including the leader
// with value want, and checks that they come in term order, never the same
// twice, with only none between leaders.
func observed(t *testing.T, seen <-chan correctness.Leader, after correctness.Leader, want string) correctness.Leader {
	t.Helper()
	last := after
	for {
		v := next(t, seen)
		switch {
		case v.Term == 0 && last.Term == 0:
			t.Fatalf("none twice in a row (after %s)", show(after))
		case v.Term != 0 && v.Term <= last.Term || v.Term != 0 && string(v.Value) != want:
			t.Fatalf("got %s after %s, want %q with a higher term", show(v), show(last), want)
		case v.Term != 0:
			return v
		}
		last = v
	}
}

// TestElectionRestartWithoutPersistence: Redis restarts and loses every key;
// the leader's term ends (ErrLockLost), the next leader's term is still
// above it (the clock floor), and an observer, whose subscription went down
// with the server, sees the new leader after the old.
func TestElectionRestartWithoutPersistence(t *testing.T) {
	s := redistest.Start(t)
	client := s.Client(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	l := correctness.New(client, correctness.WithLogger(quiet), correctness.WithAudit(false))
	defer l.Close()
	seen, err := l.Observe(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	none := next(t, seen)
	old := campaign(ctx, l, "restart", 2*time.Second, "old")
	oldTerm := old.term(t)
	oldLeader := observed(t, seen, none, "old")
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := old.result(t); !errors.Is(err, correctness.ErrLockLost) {
		t.Fatalf("the leader's Campaign after the restart: got %v, want ErrLockLost", err)
	}
	c := campaign(ctx, l, "restart", time.Minute, "new")
	term := c.term(t)
	if term <= oldTerm {
		t.Fatalf("term after the restart %d, want above %d", term, oldTerm)
	}
	if v := observed(t, seen, oldLeader, "new"); v.Term != term {
		t.Fatalf("the observer saw the new leader with term %d, Campaign gave it %d", v.Term, term)
	}
	if err := c.end(t); err != nil {
		t.Fatal(err)
	}
}

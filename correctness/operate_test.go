package correctness_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// TestInspectAndBreak: Inspect reads the holder's token, and the last token
// granted once nobody holds the lock; Break ends the holder's lease at
// once, the next grant's token is higher, and a Register refuses the broken
// holder's later write.
func TestInspectAndBreak(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b, correctness.WithAudit(false))
		reg := correctness.NewRegister(b.Client)
		if info, err := l.Inspect(ctx, "operated"); err != nil || info != (correctness.Info{}) {
			t.Fatalf("a lock never granted: got %+v, %v, want nothing", info, err)
		}
		old, err := l.TryAcquire(ctx, "operated", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := l.Inspect(ctx, "operated"); err != nil || !info.Held || info.Token != old.Token() || info.TTL <= 0 {
			t.Fatalf("held: got %+v, %v, want held with token %d", info, err, old.Token())
		}
		if broken, err := l.Break(ctx, "operated"); err != nil || !broken {
			t.Fatalf("Break: got %v, %v, want broken", broken, err)
		}
		if info, err := l.Inspect(ctx, "operated"); err != nil || info.Held || info.Token != old.Token() {
			t.Fatalf("after the break: got %+v, %v, want free, the last token %d", info, err, old.Token())
		}
		next, err := l.TryAcquire(ctx, "operated", time.Minute)
		if err != nil || next.Token() <= old.Token() {
			t.Fatalf("the next grant: got %v, %v, want a token above %d", next, err, old.Token())
		}
		if err := reg.Write(ctx, "operated-resource", next.Token(), []byte("new")); err != nil {
			t.Fatal(err)
		}
		if err := reg.Write(ctx, "operated-resource", old.Token(), []byte("stale")); !errors.Is(err, correctness.ErrStaleToken) {
			t.Fatalf("the broken holder's write: got %v, want ErrStaleToken", err)
		}
		if err := old.Release(ctx); !errors.Is(err, correctness.ErrNotHeld) {
			t.Fatalf("the broken holder's Release: got %v, want ErrNotHeld", err)
		}
		b.Client.Set(ctx, scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, "corrupt")), "garbage", 0)
		if _, err := l.Inspect(ctx, "corrupt"); !errors.Is(err, correctness.ErrInvalidToken) || !strings.Contains(err.Error(), "leasekit:{corrupt}:fence") {
			t.Fatalf("a corrupt counter: got %v, want ErrInvalidToken naming it", err)
		}
	})
}

// TestBreakDeposesTheLeader: breaking an election's lock deposes its
// leader (its fn's ctx ends with ErrLockLost at its next refresh) and hands
// office to the next candidate; an observer sees the next leader.
func TestBreakDeposesTheLeader(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := newLocker(t, b, correctness.WithAudit(false))
		seen, err := l.Observe(ctx, "deposed")
		if err != nil {
			t.Fatal(err)
		}
		next(t, seen) // none
		count := redistest.Count(b.Client)
		a := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "deposed", 600*time.Millisecond, "a")
		aTerm := a.term(t)
		if v := next(t, seen); v.Term != aTerm {
			t.Fatalf("got %s, want a@%d", show(v), aTerm)
		}
		c := campaign(ctx, newLocker(t, b, correctness.WithAudit(false)), "deposed", time.Minute, "c")
		count.Await(t, "wait", 1)
		if broken, err := l.Break(ctx, "deposed"); err != nil || !broken {
			t.Fatalf("Break: got %v, %v, want broken", broken, err)
		}
		cTerm := c.term(t)
		if cTerm <= aTerm {
			t.Fatalf("the next leader's term %d, want above %d", cTerm, aTerm)
		}
		for v := next(t, seen); v.Term != cTerm; v = next(t, seen) {
			if v.Term != 0 {
				t.Fatalf("after the break: got %s, want none or c@%d", show(v), cTerm)
			}
		}
		select {
		case err := <-a.lost:
			if !errors.Is(err, correctness.ErrLockLost) {
				t.Fatalf("the deposed leader's ctx: cause %v, want ErrLockLost", err)
			}
		case <-time.After(electionWait):
			t.Fatal("the deposed leader's ctx did not end")
		}
		if err := c.end(t); err != nil {
			t.Fatal(err)
		}
	})
}

// TestProclaim: the leader of a term changes its value from its fn, and
// the observers get each value with the same term, in order; a deposed
// leader's Proclaim fails with ErrLockLost and changes nothing.
func TestProclaim(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		l := newLocker(t, b, correctness.WithAudit(false))
		seen, err := l.Observe(ctx, "proclaimed")
		if err != nil {
			t.Fatal(err)
		}
		next(t, seen) // none
		// fn proclaims each value it is sent, and says how it went.
		proclaim, proclaimed := make(chan string), make(chan error)
		terms, done := make(chan uint64, 1), make(chan error, 1)
		go func() {
			done <- l.Campaign(ctx, "proclaimed", time.Minute, []byte("v0"), func(ctx context.Context, term uint64) error {
				terms <- term
				for v := range proclaim {
					proclaimed <- l.Proclaim(ctx, "proclaimed", term, []byte(v))
				}
				return nil
			})
		}()
		term := <-terms
		if v := next(t, seen); string(v.Value) != "v0" || v.Term != term {
			t.Fatalf("got %s, want v0@%d", show(v), term)
		}
		for _, v := range []string{"v1", "v2", "v3"} {
			proclaim <- v
			if err := <-proclaimed; err != nil {
				t.Fatalf("Proclaim %s: %v", v, err)
			}
			if got := next(t, seen); string(got.Value) != v || got.Term != term {
				t.Fatalf("after Proclaim %s: got %s, want it with the same term %d", v, show(got), term)
			}
		}
		close(proclaim)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if v := next(t, seen); v.Term != 0 {
			t.Fatalf("after the leader resigned: got %s, want none", show(v))
		}
		if err := l.Proclaim(ctx, "proclaimed", term, []byte("late")); !errors.Is(err, correctness.ErrLockLost) {
			t.Fatalf("Proclaim of a term no longer in office: got %v, want ErrLockLost", err)
		}
		if _, err := l.Leader(ctx, "proclaimed"); !errors.Is(err, correctness.ErrNoLeader) {
			t.Fatalf("Leader after a deposed Proclaim: got %v, want ErrNoLeader", err)
		}
		if err := l.Proclaim(ctx, "proclaimed", 1, make([]byte, correctness.MaxLeaderValue+1)); err == nil || !strings.Contains(err.Error(), "MaxLeaderValue") {
			t.Fatalf("a value over MaxLeaderValue: got %v", err)
		}
	})
}

package model_test

import (
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/model"
)

// The seams of a real network an outside review found bugs at: a reply
// lost and the command sent again (go-redis's retry), Break among them,
// and the server's clock stepping while waiters queue. On the protocol
// these tests were written against, each fails, listing every invariant
// broken with one of its shortest counterexamples; a fix makes them pass.

// seamKinds are the kinds the lost replies and the clock steps apply to,
// each with the operator's Breaks where it has Break (not a semaphore).
var seamKinds = []struct {
	kind   model.Kind
	limit  int
	breaks int
}{
	{model.Efficiency, 0, 1},
	{model.Correctness, 0, 1},
	{model.Semaphore, 2, 0},
	{model.Election, 0, 1},
}

// TestLostReplies: with one reply lost per path (any state-changing
// command's, Break's too) and a Break, a release and a Break report what
// their first send did, a Break ends only the grant it was sent against,
// and every invariant of TestLocks holds.
func TestLostReplies(t *testing.T) {
	for _, sk := range seamKinds {
		t.Run(sk.kind.String(), func(t *testing.T) {
			f := model.Faults{Resend: 1, Break: sk.breaks, GiveUp: 1}
			mend(t, model.Config{Kind: sk.kind, Limit: sk.limit, Clients: 3, Faults: f}, 8, 600)
		})
	}
}

// TestResentBreak is the review's double holder: a holder stuck (paused)
// with two waiters queued, and a Break whose reply is lost. Sent again, it
// must not end the grant its first send handed to the first waiter, nor
// hand the lock on to the second while the first holds it.
func TestResentBreak(t *testing.T) {
	for _, kind := range []model.Kind{model.Efficiency, model.Correctness, model.Election} {
		t.Run(kind.String(), func(t *testing.T) {
			cfg := model.Config{Kind: kind, Clients: 3, Faults: model.Faults{Resend: 1, Break: 1, Pause: 1}}
			var err error
			cfg.From, err = model.ParseSchedule(cfg, "A probe, B probe, B attempt, C probe, C attempt, A pause")
			if err != nil {
				t.Fatal(err)
			}
			mend(t, cfg, 5, 300)
		})
	}
}

// clockSteps are the steps of the server's clock the checks take: half a
// minute forward and back (past every key's life: the keys expire, or
// live half a minute longer), and five seconds forward and back (past the
// waiters' patience, within a marked key's linger), for waiters whose
// deadline is two seconds after their probe.
var clockSteps = []int64{30_000, -30_000, 5_000, -5_000}

const patience = 2_000

// TestClockSteps: a step of the server's clock, forward or back, makes no
// live waiter lose its turn (its patience is its own clock's, which did
// not step), and every invariant of TestLocks holds.
func TestClockSteps(t *testing.T) {
	for _, sk := range seamKinds {
		t.Run(sk.kind.String(), func(t *testing.T) {
			cfg := model.Config{Kind: sk.kind, Limit: sk.limit, Clients: 3, Faults: model.Faults{Step: 1, GiveUp: 1},
				Steps: clockSteps, Patience: patience}
			mend(t, cfg, 8, 600)
		})
	}
}

// mend explores cfg exhaustively to depth, going on past a violation, and
// fails with the shortest counterexample of each invariant broken; if none
// is, it takes walks random walks too, and fails on a violation.
func mend(t *testing.T, cfg model.Config, depth, walks int) {
	t.Helper()
	cfg.Depth, walks = bounds(depth, walks)
	cfg.EachInvariant = true
	r, err := model.Explore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exhaustive to depth %d: %v", cfg.Depth, r)
	for _, ce := range r.Counterexamples {
		t.Errorf("%v\nin %d moves: %v\n%v", ce.Violation, len(ce.Trace.Steps), ce.Schedule(), ce.Trace)
	}
	if len(r.Counterexamples) == 0 {
		walk(t, cfg, walks)
	}
}

package model_test

import (
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/model"
)

// fifoCases are the holder that dies with waiters queued: its lease
// expires, and the lock must go to the first live waiter. With newcomers,
// a participant may also arrive after the expiry; without, every one
// arrives at the start, so only the waiters' own attempts race.
var fifoCases = []struct {
	name string
	cfg  model.Config
}{
	{"queued waiters", model.Config{Kind: model.Efficiency, Clients: 3, Faults: model.Faults{Die: 1}, ArriveAtStart: true, LapsedFIFO: true, Depth: 10}},
	{"newcomer", model.Config{Kind: model.Efficiency, Clients: 3, Faults: model.Faults{Die: 1}, LapsedFIFO: true, Depth: 10}},
	{"correctness", model.Config{Kind: model.Correctness, Clients: 3, Faults: model.Faults{Die: 1}, ArriveAtStart: true, LapsedFIFO: true, Depth: 10}},
}

// TestQueueOrderAfterAnExpiry: on the scripts as of issue 32 an expired
// lease goes to whichever waiter's timer fires first (or a newcomer's
// probe), not to the first live waiter: the checker must find that, and
// prints the shortest counterexample. Once lapsedServesHead is flipped, it
// asserts that no order is broken.
func TestQueueOrderAfterAnExpiry(t *testing.T) {
	for _, tc := range fifoCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := model.Explore(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			finding(t, r, lapsedServesHead, model.FIFO, "lapsedServesHead")
		})
	}
}

// TestForgedGrantMessage: a grant message nobody granted, published on a
// waiter's channel, must cost at most one read (DESIGN.md). As of issue 32
// a waiter takes it as its grant without a read and leaves its entry
// queued, so the next release hands the lock to a waiter that left: the
// lock is lost for a ttl. Once forgedCostsOneRead is flipped, it asserts
// that nothing is broken.
func TestForgedGrantMessage(t *testing.T) {
	depth, _ := bounds(8, 0)
	cfg := model.Config{Kind: model.Correctness, Clients: 2, Faults: model.Faults{Forge: 1}, LapsedFIFO: lapsedServesHead, Depth: depth}
	r, err := model.Explore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	finding(t, r, forgedCostsOneRead, model.Entries, "forgedCostsOneRead")
}

// finding checks a result that breaks invariant want until the scripts are
// fixed (flag, named so, says they are): then it must break nothing. It
// logs the counterexample.
func finding(t *testing.T, r model.Result, fixed bool, want, flag string) {
	t.Helper()
	t.Logf("%v", r)
	switch {
	case fixed && r.Violation != nil:
		t.Fatalf("%v\n%v", r.Violation, r.Trace)
	case fixed:
	case r.Violation == nil || r.Violation.Invariant != want:
		t.Fatalf("got %v, want a violation of %q (flip %s if the scripts are fixed)", r.Violation, want, flag)
	default:
		t.Logf("the shortest counterexample:\n%v", r.Trace)
	}
}

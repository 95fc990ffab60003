package model_test

import (
	"os"
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/model"
)

// long says LEASEKIT_MODEL_LONG=1 asks for the long mode: deeper, and more
// walks.
var long = os.Getenv("LEASEKIT_MODEL_LONG") == "1"

// bounds picks a check's exhaustive depth and walks: the default, less under
// the race detector, more in the long mode.
func bounds(depth, walks int) (int, int) {
	switch {
	case long:
		return depth + 2, walks * 20
	case model.RaceEnabled:
		return depth - 2, walks / 10
	}
	return depth, walks
}

// walkDepth is how many moves a random walk takes.
const walkDepth = 40

// every fault but a forged message (TestForgedGrantMessage): one of each
// per path.
var faults = model.Faults{Die: 1, Pause: 1, Lose: 1, Dup: 1, Restart: 1, GiveUp: 1}

// check explores cfg exhaustively to depth and by walks random walks, and
// fails on any violation, printing its trace; or if the exhaustive search
// took none of the paths named.
func check(t *testing.T, cfg model.Config, depth, walks int, paths ...string) {
	t.Helper()
	cfg.Depth, walks = bounds(depth, walks)
	r, err := model.Explore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exhaustive to depth %d: %v", cfg.Depth, r)
	if r.Violation != nil {
		t.Fatalf("%v\n%v", r.Violation, r.Trace)
	}
	reached(t, r, paths...)
	walk(t, cfg, walks)
}

// walk takes walks random walks of cfg, and fails on any violation,
// printing its trace.
func walk(t *testing.T, cfg model.Config, walks int) {
	t.Helper()
	r, err := model.Walk(cfg, walks, walkDepth, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d random walks of %d moves: %v", walks, walkDepth, r)
	if r.Violation != nil {
		t.Fatalf("%v\n%v", r.Violation, r.Trace)
	}
}

// reached fails unless r took every path named (model.Result.Paths): a
// check that stopped reaching them would pass for nothing. Under the race
// detector, two moves less may not reach them.
func reached(t *testing.T, r model.Result, paths ...string) {
	t.Helper()
	if model.RaceEnabled {
		return
	}
	for _, p := range paths {
		if r.Paths[p] == 0 {
			t.Errorf("no step took the path %q (%v)", p, r.Paths)
		}
	}
}

func TestLocks(t *testing.T) {
	for _, kind := range []model.Kind{model.Efficiency, model.Correctness} {
		t.Run(kind.String(), func(t *testing.T) {
			check(t, model.Config{Kind: kind, Clients: 3, Faults: faults}, 9, 1000)
		})
	}
	t.Run("4 participants", func(t *testing.T) {
		few := model.Faults{Die: 1, GiveUp: 1}
		check(t, model.Config{Kind: model.Correctness, Clients: 4, Faults: few}, 8, 300)
	})
}

func TestSemaphore(t *testing.T) {
	// The semaphore's waits serve its queue in order after a permit
	// lapsed too: held to the rule.
	check(t, model.Config{Kind: model.Semaphore, Limit: 2, Clients: 3, Faults: faults}, 9, 1000)
}

func TestElection(t *testing.T) {
	check(t, model.Config{Kind: model.Election, Clients: 3, Faults: faults}, 8, 600)
}

// TestDeadEntries: with every script call looking at one queue entry
// (Config.Scan), a dead waiter's entry stops each call that meets it, as a
// hundred entries of a killed process stop a real one: the lock is left
// vacant, a waiter's attempt says to attempt again, a release says to go
// on, and a lone try settles in more than one call.
func TestDeadEntries(t *testing.T) {
	short := []string{model.PathStopShort, model.PathServeOn}
	for _, tc := range []struct {
		cfg   model.Config
		depth int
		paths []string
	}{
		{model.Config{Kind: model.Efficiency, Clients: 3, Scan: 1, Faults: model.Faults{Die: 2}}, 10, short},
		{model.Config{Kind: model.Correctness, Clients: 3, Scan: 1, Tries: true, Faults: model.Faults{Die: 1, Pause: 1}}, 9,
			append(short, model.PathSettle)},
		{model.Config{Kind: model.Semaphore, Limit: 1, Clients: 3, Scan: 1, Faults: model.Faults{Die: 2}}, 9, short},
	} {
		t.Run(tc.cfg.Kind.String(), func(t *testing.T) { check(t, tc.cfg, tc.depth, 300, tc.paths...) })
	}
}

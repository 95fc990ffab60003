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
	case raceEnabled:
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
// fails on any violation, printing its trace.
func check(t *testing.T, cfg model.Config, depth, walks int) {
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
	r, err = model.Walk(cfg, walks, walkDepth, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d random walks of %d moves: %v", walks, walkDepth, r)
	if r.Violation != nil {
		t.Fatalf("%v\n%v", r.Violation, r.Trace)
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

package main

import (
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestSemaphoreScenario runs the semaphore scenario on both backends, in
// this process and across two worker processes: every contender got a
// permit, no more than N held at once, and the server served the queue in
// order. It checks no timings.
func TestSemaphoreScenario(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		args := []string{"-quick", "-json", "-scenarios", "semaphore", "-contenders", "8", "-procs", "2"}
		if b.Real() {
			args = append(args, "-addr", b.Server.Addr)
		}
		rows := runBench(t, args...).printed(t)
		if len(rows) != 2 {
			t.Fatalf("got %d rows, want 2 (this process, 2 processes)", len(rows))
		}
		for _, r := range rows {
			switch {
			case r.Acquired != 8 || r.Failures != 0:
				t.Errorf("P=%d: acquired %d with %d failures, want 8 and none", r.Procs, r.Acquired, r.Failures)
			case r.MaxHolders < 1 || r.MaxHolders > r.Limit || r.Overlaps != 0:
				t.Errorf("P=%d: at most %d holders at once (%d beyond), want 1 to %d", r.Procs, r.MaxHolders, r.Overlaps, r.Limit)
			case r.OutOfOrder == nil || *r.OutOfOrder != 0:
				t.Errorf("P=%d: out of order %v, want 0: the server serves the queue in order", r.Procs, r.OutOfOrder)
			case r.Makespan <= 0 || r.IdealNs <= 0:
				t.Errorf("P=%d: makespan %d, ideal %d, want both positive", r.Procs, r.Makespan, r.IdealNs)
			case b.Real() && (r.ServerCallsPerAcq == nil || *r.ServerCallsPerAcq <= 0):
				t.Errorf("P=%d: no server calls per acquisition", r.Procs)
			}
		}
	})
}

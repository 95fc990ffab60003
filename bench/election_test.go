package main

import (
	"slices"
	"testing"
)

// TestElectionScenario runs `go run ./bench -quick -json -scenarios
// election` on the in-process miniredis, with candidate processes (this test
// binary re-executed): every round ran, and each row has samples, in the
// JSON with p50 and p99. It checks no timings.
func TestElectionScenario(t *testing.T) {
	res := runBench(t, "-quick", "-json", "-scenarios", "election")
	var libs []string
	for _, r := range res.printed(t) {
		if r.Scenario != "election" {
			continue
		}
		libs = append(libs, r.Lib)
		if r.Failures != 0 || r.N != 2 || r.P50 <= 0 || r.P99 < r.P50 || r.Config == "" {
			t.Errorf("%s: got n %d, p50 %d, p99 %d, failures %d, from→to %q; want 2 samples, positive, no failures\nstderr:\n%s",
				r.Lib, r.N, r.P50, r.P99, r.Failures, r.Config, res.stderr)
		}
	}
	want := []string{"correctness (resign)", "correctness (kill -9)", "observer (resign)", "observer (kill -9)"}
	if !slices.Equal(libs, want) {
		t.Fatalf("got rows %q, want %q", libs, want)
	}
}

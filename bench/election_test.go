package main

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

// TestElectionScenario runs `go run ./bench -quick -json -scenarios
// election` on the in-process miniredis, with candidate processes (this test
// binary re-executed): every round ran, and each row has samples, in the
// JSON with p50 and p99. It checks no timings.
func TestElectionScenario(t *testing.T) {
	cfg, err := parseFlags([]string{"-quick", "-json", "-scenarios", "election"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	var stdout, stderr bytes.Buffer
	if _, err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	var libs []string
	for _, r := range decodeRows(t, &stdout) {
		if r.Scenario != "election" {
			continue
		}
		libs = append(libs, r.Lib)
		if r.Failures != 0 || r.N != 2 || r.P50 <= 0 || r.P99 < r.P50 || r.Config == "" {
			t.Errorf("%s: got n %d, p50 %d, p99 %d, failures %d, from→to %q; want 2 samples, positive, no failures\nstderr:\n%s",
				r.Lib, r.N, r.P50, r.P99, r.Failures, r.Config, stderr.String())
		}
	}
	want := []string{"correctness (resign)", "correctness (kill -9)", "observer (resign)", "observer (kill -9)"}
	if !slices.Equal(libs, want) {
		t.Fatalf("got rows %q, want %q", libs, want)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummaryHasEachTablesRatios: the summary after the tables has a line
// per table (per process count and start in convoy-procs) with each
// subject's ratio to the reference, and leaves the references out.
func TestSummaryHasEachTablesRatios(t *testing.T) {
	rows := []row{
		{Scenario: "uncontended", Lib: "2×PING (ref)", Reference: true, Ratio: 1, RatioTo: "2×PING p50"},
		{Scenario: "uncontended", Lib: "efficiency", Ratio: 1.05, RatioTo: "2×PING p50"},
		{Scenario: "uncontended", Lib: "redsync", Ratio: 2.5, RatioTo: "2×PING p50"},
		{Scenario: "convoy-procs", Lib: "efficiency", Procs: 16, Cold: true, Ratio: 1.3, RatioTo: "ideal makespan"},
		{Scenario: "convoy-procs", Lib: "efficiency", Procs: 16, Ratio: 1.2, RatioTo: "ideal makespan"},
	}
	var b bytes.Buffer
	writeSummary(&b, rows)
	got := b.String()
	for _, want := range []string{
		"  uncontended, ÷ 2×PING p50: efficiency 1.05, redsync 2.50\n",
		"  convoy-procs P=16 cold, ÷ ideal makespan: efficiency 1.30\n",
		"  convoy-procs P=16 warm, ÷ ideal makespan: efficiency 1.20\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "(ref)") {
		t.Errorf("summary %q lists a reference", got)
	}
}

// TestProgressOffATerminal: a log gets a line when a scenario begins, with
// its step and elapsed time, and then at most one every progressEvery.
func TestProgressOffATerminal(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b)
	p.say("convoy-procs", "P=16 run 1/3")
	p.say("convoy-procs", "P=16 run 2/3") // within progressEvery: held back
	p.say("semaphore", "run 1/2")
	got := b.String()
	want := "bench: convoy-procs: P=16 run 1/3, 0s\nbench: semaphore: run 1/2, 0s\n"
	if got != want {
		t.Errorf("progress: got %q, want %q", got, want)
	}
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMECrontabRunsOncePerTick runs the crontab of the README's "Cron
// jobs" section, read from the README, as three machines whose crons fire
// 200 ms apart would at one tick, each job taking 50 ms: every line must
// run its job once across the three.
func TestREADMECrontabRunsOncePerTick(t *testing.T) {
	t.Parallel()
	lines := readmeCrontab(t)
	if len(lines) == 0 {
		t.Fatal("README.md: no crontab line that runs lockrun after \"Give every machine the same crontab:\"")
	}
	h := newHarness(t)
	var procs [][]*proc
	for m := range 3 {
		if m > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		var started []*proc
		for i, args := range lines {
			job := fmt.Sprintf("echo ran >> runs-%d; sleep 0.05", i)
			started = append(started, h.start(nil, append(args, "--", "sh", "-c", job)...))
		}
		procs = append(procs, started)
	}
	for i, args := range lines {
		codes := map[int]int{}
		for m := range procs {
			codes[procs[m][i].wait(t).code]++
		}
		if runs := h.lines(fmt.Sprintf("runs-%d", i)); runs != 1 || codes[0] != 1 || codes[exitNotObtained] != 2 {
			t.Errorf("crontab line %q on three machines: the job ran %d times (exit statuses %v); want once, and two skips (%d)",
				strings.Join(args, " "), runs, codes, exitNotObtained)
		}
	}
}

// readmeCrontab returns the lockrun arguments (before "--") of each line of
// the README's crontab that runs lockrun.
func readmeCrontab(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "Give every machine the same crontab:\n\n```\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("README.md: no code block after \"Give every machine the same crontab:\"")
	}
	var lines [][]string
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[5] != "lockrun" {
			continue // the environment, or not a lockrun job
		}
		args := f[6:]
		for k, a := range args {
			if a == "--" {
				args = args[:k]
				break
			}
		}
		lines = append(lines, args)
	}
	return lines
}

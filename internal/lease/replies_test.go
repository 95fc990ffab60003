package lease

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReplyCodesMatchTheScripts holds the reply codes of replies.go against
// those each script's header lists (scripts/scripts.go says how), so that a
// code changed in a header or in a constant alone fails it. A script not in
// the table must list none: the engine would not know them.
func TestReplyCodesMatchTheScripts(t *testing.T) {
	waits := []int64{waitGranted, waitHeld, waitQueued, waitWaiting, waitSettle}
	want := map[string][]int64{
		"fenced_acquire": {fencedLapsed},
		"wait":           waits,
		"sem_wait":       waits,
		"sem_acquire":    {waitGranted, waitHeld, waitWaiting, waitSettle},
		"refresh":        {leaseHeld, leaderLost, leaseGone, leaseTaken},
		"sem_refresh":    {leaseHeld, leaseGone},
		"release":        {leaseHeld, releaseHanded, leaseGone, leaseTaken, releasedServeOn, goneServeOn},
		"sem_release":    {leaseHeld, releaseHanded, leaseGone, releasedServeOn},
		"pttl":           {ttlGone, ttlTaken},
		"sem_pttl":       {ttlGone},
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "scripts", "*.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the scripts: got %d files, %v", len(files), err)
	}
	seen := 0
	for _, file := range files {
		script := strings.TrimSuffix(filepath.Base(file), ".lua")
		t.Run(script, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			codes, ok := want[script]
			if ok {
				seen++
			}
			got, wantCodes := distinct(replyCodes(header(string(src)))), distinct(codes)
			if !slices.Equal(got, wantCodes) {
				t.Errorf("reply codes: the header lists %v, replies.go has %v", got, wantCodes)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("scripts found: %d of the %d with codes", seen, len(want))
	}
}

// codeLine is a line of a header's Reply section that lists a code: alone,
// or first in a table, indented two spaces past the prose.
var codeLine = regexp.MustCompile(`^-- {3}\{?(-?[0-9]+)[ ,}]`)

// replyCodes are the codes the Reply section of a script's header lists.
func replyCodes(header []string) []int64 {
	var codes []int64
	reply := false
	for _, line := range header {
		reply = reply || strings.HasPrefix(line, "-- Reply")
		if m := codeLine.FindStringSubmatch(line); reply && m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			codes = append(codes, n)
		}
	}
	return codes
}

// header is the header of the script src: its leading comment lines.
func header(src string) []string {
	var lines []string
	for line := range strings.SplitSeq(src, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		lines = append(lines, line)
	}
	return lines
}

// distinct is codes sorted, each once.
func distinct(codes []int64) []int64 {
	codes = slices.Clone(codes)
	slices.Sort(codes)
	return slices.Compact(codes)
}

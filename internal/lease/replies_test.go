package lease

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/luaheader"
)

// readElsewhere are the scripts whose reply codes another package reads,
// and holds to their headers (correctness's TestReplyCodesMatchTheScripts).
var readElsewhere = map[string]bool{
	"election_announce": true, "election_proclaim": true, "election_resign": true,
	"election_leader": true, "register_write": true,
}

// TestReplyCodesMatchTheScripts holds the reply codes of replies.go against
// those each script's header lists (scripts/scripts.go says how), so that a
// code changed in a header or in a constant alone fails it. A script not in
// the table must list none (the engine would not know them), unless another
// package reads it (readElsewhere).
func TestReplyCodesMatchTheScripts(t *testing.T) {
	waits := []int64{waitGranted, waitHeld, waitQueued, waitWaiting, waitSettle}
	want := map[string][]int64{
		"fenced_acquire": {fencedLapsed},
		"wait":           waits,
		"sem_wait":       waits,
		"sem_acquire":    {waitGranted, waitHeld, waitWaiting, waitSettle},
		"refresh":        {leaseHeld, leaderLost, leaseGone, leaseTaken},
		"sem_refresh":    {leaseHeld, leaseGone},
		"release":        {leaseHeld, releaseHanded, leaseGone, leaseTaken, leaseBroken, releasedServeOn, goneServeOn},
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
			got, err := luaheader.Codes(file)
			if err != nil {
				t.Fatal(err)
			}
			codes, ok := want[script]
			if ok {
				seen++
			}
			if !ok && readElsewhere[script] {
				return // the reading package's test holds it
			}
			wantCodes := luaheader.Distinct(codes)
			if !slices.Equal(got, wantCodes) {
				t.Errorf("reply codes: the header lists %v, replies.go has %v", got, wantCodes)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("scripts found: %d of the %d with codes", seen, len(want))
	}
}

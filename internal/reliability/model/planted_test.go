package model_test

import (
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/model"
)

// plant returns the scripts with old replaced by bug in the source *src
// picks; the test fails if old is not there (the script changed: update
// the plant).
func plant(t *testing.T, src func(*model.Scripts) *string, old, bug string) model.Scripts {
	t.Helper()
	s := model.Leasekit()
	p := src(&s)
	if !strings.Contains(*p, old) {
		t.Fatalf("the script no longer holds %q: plant the bug elsewhere", old)
	}
	*p = strings.Replace(*p, old, bug, 1)
	return s
}

// planted are bugs planted in a copy of the scripts, each with the
// invariant that must catch it.
func planted(t *testing.T) []struct {
	name, want string
	cfg        model.Config
} {
	releaseSecond := plant(t, func(s *model.Scripts) *string { return &s.Release },
		"local w, now = next_waiter(KEYS[2], nil, numsub)\n",
		"local w, now = next_waiter(KEYS[2], nil, numsub)\n  if w then w, now = next_waiter(KEYS[2], now, numsub) end\n")
	refreshAny := plant(t, func(s *model.Scripts) *string { return &s.Refresh },
		"  return -1\nend\nredis.call('PEXPIRE'", "end\nredis.call('PEXPIRE'")
	return []struct {
		name, want string
		cfg        model.Config
	}{
		{"a release that hands the lock to the second waiter", model.FIFO,
			model.Config{Kind: model.Correctness, Clients: 3, Scripts: releaseSecond, LapsedFIFO: lapsedServesHead}},
		{"a refresh that extends another owner's lease", model.Looks,
			model.Config{Kind: model.Efficiency, Clients: 2, Scripts: refreshAny, LapsedFIFO: lapsedServesHead}},
	}
}

// TestPlantedBugs: the checker catches a bug planted in the scripts; the
// same configuration on the real scripts passes in TestLocks.
func TestPlantedBugs(t *testing.T) {
	for _, tc := range planted(t) {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Depth = 10
			r, err := model.Explore(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v", r)
			if r.Violation == nil || r.Violation.Invariant != tc.want {
				t.Fatalf("got %v, want a violation of %q", r.Violation, tc.want)
			}
			t.Logf("caught:\n%v", r.Trace)
		})
	}
}

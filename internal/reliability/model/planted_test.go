package model_test

import (
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/model"
)

// plant returns the scripts with old replaced by bug in each source that
// one of srcs picks; the test fails if old is not there (the script
// changed: update the plant).
func plant(t *testing.T, old, bug string, srcs ...func(*model.Scripts) *string) model.Scripts {
	t.Helper()
	s := model.Leasekit()
	for _, src := range srcs {
		p := src(&s)
		if !strings.Contains(*p, old) {
			t.Fatalf("the script no longer holds %q: plant the bug elsewhere", old)
		}
		*p = strings.Replace(*p, old, bug, 1)
	}
	return s
}

// planted are bugs planted in a copy of the scripts, each with the
// invariant that must catch it.
func planted(t *testing.T) []struct {
	name, want string
	cfg        model.Config
} {
	release := func(s *model.Scripts) *string { return &s.Release }
	releaseSecond := plant(t, "local w, now = next_waiter(KEYS[2], nil, numsub)\n",
		"local w, now = next_waiter(KEYS[2], nil, numsub)\n  if w then w, now = next_waiter(KEYS[2], now, numsub) end\n", release)
	refreshAny := plant(t, "  return -1\nend\nredis.call('PEXPIRE'", "end\nredis.call('PEXPIRE'",
		func(s *model.Scripts) *string { return &s.Refresh })
	// grant.lua, prepended to the three scripts that grant
	noFloor := plant(t, "if kind == 'f' then", "if kind == 'f' or kind == 'c' then", release,
		func(s *model.Scripts) *string { return &s.Wait }, func(s *model.Scripts) *string { return &s.FencedAcquire })
	return []struct {
		name, want string
		cfg        model.Config
	}{
		{"a release that hands the lock to the second waiter", model.FIFO,
			model.Config{Kind: model.Correctness, Clients: 3, Scripts: releaseSecond, LapsedFIFO: lapsedServesHead}},
		{"a refresh that extends another owner's lease", model.Looks,
			model.Config{Kind: model.Efficiency, Clients: 2, Scripts: refreshAny, LapsedFIFO: lapsedServesHead}},
		{"a grant that ignores the clock floor", model.Tokens,
			model.Config{Kind: model.Correctness, Clients: 2, Scripts: noFloor, Faults: model.Faults{Restart: 1}, LapsedFIFO: lapsedServesHead}},
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

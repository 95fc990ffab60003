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
	wait := func(s *model.Scripts) *string { return &s.Wait }
	releaseSecond := plant(t, "  w, now = next_waiter(KEYS[2], now, scan)\n",
		"  w, now = next_waiter(KEYS[2], now, scan)\n  if w then w, now = next_waiter(KEYS[2], now, scan) end\n", release)
	refreshAny := plant(t, "== 1) then\n  return -1\n", "== 1) then\n  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n  return 1\n",
		func(s *model.Scripts) *string { return &s.Refresh })
	// grant.lua, prepended to the three scripts that grant
	noFloor := plant(t, "if kind == 'f' then", "if kind == 'f' or kind == 'c' then", release, wait,
		func(s *model.Scripts) *string { return &s.FencedAcquire })
	// a lapsed lease (not the vacant value's, lapsed too) goes to the
	// caller, as a free lock went before the engine served the queue first
	lapsedToCaller := plant(t, "local w = next_waiter(KEYS[2], now, scan, ARGV[4], ARGV[6])",
		"local w = left == 0 and redis.call('GET', KEYS[1]) ~= '*0' and {mine = true} or next_waiter(KEYS[2], now, scan, ARGV[4], ARGV[6])", wait)
	return []struct {
		name, want string
		cfg        model.Config
	}{
		{"a release that hands the lock to the second waiter", model.FIFO,
			model.Config{Kind: model.Correctness, Clients: 3, Scripts: releaseSecond}},
		{"a refresh that extends another owner's lease", model.Looks,
			model.Config{Kind: model.Efficiency, Clients: 2, Scripts: refreshAny}},
		{"a grant that ignores the clock floor", model.Tokens,
			model.Config{Kind: model.Correctness, Clients: 2, Scripts: noFloor, Faults: model.Faults{Restart: 1}}},
		{"a wait that takes a lapsed lease without serving the queue", model.FIFO,
			model.Config{Kind: model.Efficiency, Clients: 3, Scripts: lapsedToCaller, Faults: model.Faults{Die: 1}, ArriveAtStart: true}},
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

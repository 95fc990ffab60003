package model_test

import (
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/model"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestReplayOnRedis runs schedules on a real redis-server, beside miniredis:
// the counterexamples the checker finds, which must break the same invariant
// there, and random schedules, which must break none; and every step must
// leave both servers alike.
func TestReplayOnRedis(t *testing.T) {
	b := redistest.Real(t)
	for _, tc := range planted(t) {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Depth = 10
			replayFound(t, b, tc.cfg, tc.want)
		})
	}
	t.Run("a forged grant message beside a real one", func(t *testing.T) {
		cfg := model.Config{Kind: model.Correctness, Clients: 3, Faults: model.Faults{Forge: 1}, Depth: 9}
		if !forgedKeepsRealGrant {
			replayFound(t, b, cfg, model.Entries)
			return
		}
		for _, s := range forgedBesideReal {
			ps, err := model.ParseSchedule(cfg, s)
			if err != nil {
				t.Fatal(err)
			}
			if tr := replay(t, b, cfg, ps, ""); !strings.Contains(tr.String(), "(heard)") {
				t.Errorf("B's Locker released no grant it heard of:\n%v", tr)
			}
		}
	})
	t.Run("a release after a resent DELEX", func(t *testing.T) {
		// On a server without DELEX, its equivalent script (real.go).
		// TestPlainResentDelete's finding: a restart took the lease.
		cfg := model.Config{Kind: model.Efficiency, Clients: 1, Plain: true, Faults: model.Faults{Resend: 1, Restart: 1}, Depth: 5}
		want := model.ResentDelete
		if plainResentDeleteFixed {
			want = ""
		}
		replayFound(t, b, cfg, want)
	})
	for _, tc := range []struct {
		name string
		cfg  model.Config
	}{
		{"efficiency lock", model.Config{Kind: model.Efficiency, Clients: 3, Faults: faults}},
		{"efficiency lock, plain path", model.Config{Kind: model.Efficiency, Clients: 3, Faults: faults, Plain: true}},
		{"correctness lock", model.Config{Kind: model.Correctness, Clients: 3, Faults: faults}},
		{"semaphore", model.Config{Kind: model.Semaphore, Limit: 2, Clients: 3, Faults: faults}},
		{"election", model.Config{Kind: model.Election, Clients: 3, Faults: faults}},
		{"a dead holder, and lone tries", model.Config{Kind: model.Correctness, Clients: 3, Faults: model.Faults{Die: 1}, Tries: true}},
		{"dead entries", model.Config{Kind: model.Efficiency, Clients: 3, Scan: 1, Faults: model.Faults{Die: 2}}},
	} {
		t.Run("random: "+tc.name, func(t *testing.T) {
			ss, err := model.Schedules(tc.cfg, 2, 25, 7, 1100)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range ss {
				replay(t, b, tc.cfg, s, "")
			}
		})
	}
}

// forgedBesideReal are the two orders of a forged grant message and the
// real one to the same waiter, B, which reads the older: the real one
// (its Locker releases the forged grant, which the lock does not hold), or
// the forged one (its Locker passes the real grant on to C, queued behind
// B, and B's release of the forged one takes its entry out).
var forgedBesideReal = []string{
	"A probe, B probe, B attempt, A release, forge to B, B receive #0, B hears #0, B release",
	"A probe, B probe, B attempt, C probe, C attempt, forge to B, A release, B receive #0, B hears #0, " +
		"C receive #0, C release, B release",
}

// replayFound explores cfg and replays what it found: a violation of want
// ("" for none).
func replayFound(t *testing.T, b *redistest.Backend, cfg model.Config, want string) {
	t.Helper()
	r, err := model.Explore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if (r.Violation == nil) != (want == "") {
		t.Fatalf("explored: %v, want a violation of %q", r, want)
	}
	if want != "" {
		replay(t, b, cfg, r.Schedule(), want)
	}
}

// replay replays s on b, checks that it breaks want ("" for none), and
// returns the real run's trace. A replay whose real run differs from
// miniredis's is tried again: a stall of a ttl lets a lease run out early
// on a real clock. Three in a row fail.
func replay(t *testing.T, b *redistest.Backend, cfg model.Config, s model.Schedule, want string) *model.Trace {
	t.Helper()
	var err error
	for range 3 {
		var tr *model.Trace
		if tr, err = model.Replay(t.Context(), cfg, s, b.Client); err != nil {
			t.Logf("replay of %v: %v", s, err)
			continue
		}
		switch {
		case want == "" && tr.Violation != nil:
			t.Fatalf("on redis-server: %v\n%v", tr.Violation, tr)
		case want != "" && (tr.Violation == nil || tr.Violation.Invariant != want):
			t.Fatalf("on redis-server: got %v, want a violation of %q\n%v", tr.Violation, want, tr)
		case want != "":
			t.Logf("on redis-server:\n%v", tr)
		}
		return tr
	}
	t.Fatalf("three replays differed from miniredis: %v", err)
	return nil
}

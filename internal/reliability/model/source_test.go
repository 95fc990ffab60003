package model_test

import (
	"regexp"
	"testing"

	"github.com/leasekit/leasekit/internal/reliability/model"
)

// The token source (Config.Source, internal/lease's tokens.go): a grant's
// holder draws its token from a counter outside Redis, and stamps it into
// its grant, each a move of its own; Tokens holds every stamp to a token
// above every one held before it, with no path exempt, a restart and a
// step of the server's clock back on the same path included.

// stepBack is the one step of the server's clock the checks take: half a
// minute back, past every ttl and a marked key's linger, which undoes the
// clock floor after a restart.
var stepBack = []int64{-30_000}

// TestTokenSource: under restarts, steps of the server's clock back, pauses
// and lost replies, every token a stamp stores is above every one held
// before it, and every invariant of TestLocks holds. The checks reach a
// stamp that holds a grant whose Redis token went back (PathFloorless). The
// depths stay below the ones where the faults meet the findings that
// TestTokenSourceLostRepliesAcrossRestarts lists, without the source too.
func TestTokenSource(t *testing.T) {
	lock := model.Config{Kind: model.Correctness, Clients: 2, Source: true, Steps: stepBack}
	for _, tc := range []struct {
		name  string
		cfg   model.Config
		f     model.Faults
		depth int
		paths []string
	}{
		{"restart, step back, pause", lock, model.Faults{Restart: 1, Step: 1, Pause: 1}, 10,
			[]string{model.PathFloorless, model.PathLateStamp, model.PathNoToken}},
		{"3 participants", model.Config{Kind: model.Correctness, Clients: 3, Source: true, Steps: stepBack},
			model.Faults{Restart: 1, Step: 1}, 10, []string{model.PathFloorless, model.PathLateStamp, model.PathServedHead}},
		{"lost replies, step back", lock, model.Faults{Resend: 1, Step: 1}, 9,
			[]string{model.PathRestamped, model.PathLateStamp}},
		{"election", model.Config{Kind: model.Election, Clients: 2, Source: true, Steps: stepBack},
			model.Faults{Restart: 1, Step: 1}, 10, []string{model.PathFloorless, model.PathLateStamp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Faults = tc.f
			tc.cfg.Depth, _ = bounds(tc.depth, 0)
			reached(t, explore(t, tc.cfg, false, "", ""), tc.paths...)
		})
	}
}

// preexisting are the findings a check of a lock with lost replies,
// restarts and steps of the clock back meets whether or not its tokens
// come from a source (no other test lets these faults meet): a release
// whose reply was lost, sent again after a restart without persistence
// took its mark, says "not held"; and a step back brings a lease that had
// lapsed back to life after its holder stopped holding it, which outlives
// a round trip. Neither is the source's.
var preexisting = map[string]*regexp.Regexp{
	model.NoFalseLoss: regexp.MustCompile(`release \(reply lost\), restart, . resends$`),
	model.Entries:     regexp.MustCompile(`refresh, step #0, .*advance$`),
}

// TestTokenSourceLostRepliesAcrossRestarts: a stamp whose reply was lost,
// sent again across a restart or a step of the clock back, holds only the
// grant its first send stored, and tokens increase on every path. The
// check goes on past a violation (Config.EachInvariant) and lets pass only
// the shortest counterexamples of the findings preexisting names, which
// leaves their invariants unchecked past them on this check alone.
func TestTokenSourceLostRepliesAcrossRestarts(t *testing.T) {
	cfg := model.Config{Kind: model.Correctness, Clients: 2, Source: true, Steps: stepBack,
		Faults: model.Faults{Resend: 1, Restart: 1, Step: 1}, EachInvariant: true}
	cfg.Depth, _ = bounds(10, 0)
	r, err := model.Explore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exhaustive to depth %d: %v", cfg.Depth, r)
	for _, ce := range r.Counterexamples {
		if re := preexisting[ce.Violation.Invariant]; re != nil && re.MatchString(ce.Schedule().String()) {
			t.Logf("the finding without the source too, in %d moves: %v", len(ce.Trace.Steps), ce.Schedule())
			continue
		}
		t.Errorf("%v\nin %d moves: %v\n%v", ce.Violation, len(ce.Trace.Steps), ce.Schedule(), ce.Trace)
	}
	reached(t, r, model.PathRestamped, model.PathFloorless, model.PathLateStamp)
}

// TestPlantedClientBugs: the checker catches a mirror of the Go client that
// breaks the source's flow: one that draws its token as its acquire
// begins, before any grant (a later holder may have drawn after it), and
// one that stamps without reading the reply.
func TestPlantedClientBugs(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		cfg        model.Config
	}{
		{"a token drawn before the grant", model.Tokens,
			model.DrawEarly(model.Config{Kind: model.Correctness, Clients: 2, Source: true, Depth: 10})},
		{"a stamp whose reply is not read", model.Looks,
			model.Unchecked(model.Config{Kind: model.Correctness, Clients: 2, Source: true, Faults: model.Faults{Restart: 1}, Depth: 8})},
	} {
		t.Run(tc.name, func(t *testing.T) { explore(t, tc.cfg, true, tc.want, "the plant") })
	}
}

// TestStampHoldsOnlyItsOwn: a stamp holds only a grant it stored, even
// when the scripts made the very grant it stores. refresh.lua counts a lock
// that holds ARGV[4] the caller's (a resend of the stamp) only with the
// mark the stamp leaves, for the Redis counter can make that grant: a
// waiter takes a forged grant message (owner:7), which leaves its entry
// queued, and draws token n; another holder draws n+1, stamps it and
// releases, which hands the lock to the waiter's entry with the counter's
// token n, as the scripts grant any fenced lock; the waiter's stamp (owner:7
// to owner:n) finds owner:n. Without the mark it held token n after n+1 was
// held, found in 14 moves, two participants, one forged message; the check
// covers them.
func TestStampHoldsOnlyItsOwn(t *testing.T) {
	cfg := model.Config{Kind: model.Correctness, Clients: 2, Source: true, Faults: model.Faults{Forge: 1}, Depth: 14}
	explore(t, cfg, false, "", "")
}

package model

import "testing"

// TestLockerMemoryMatters: the forged grant message's check (a forged
// message alone) holds only because the Locker remembers what its waiters
// took, and passes on a grant handed to one that left: a Locker that
// forgets, or that hears and does nothing, costs the lock a ttl, and the
// check finds that.
func TestLockerMemoryMatters(t *testing.T) {
	if raceEnabled {
		t.Skip("the same under the race detector, ten times slower")
	}
	for _, cfg := range []Config{
		{Kind: Correctness, Clients: 3, Faults: Faults{Forge: 1}, ForgeAlone: true, Depth: 10, forgetful: true},
		{Kind: Correctness, Clients: 3, Faults: Faults{Forge: 1}, ForgeAlone: true, Depth: 10, deaf: true},
		{Kind: Efficiency, Clients: 3, Faults: Faults{Forge: 1}, ForgeAlone: true, Depth: 10, deaf: true},
	} {
		r, err := Explore(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation == nil || r.Violation.Invariant != Entries {
			t.Fatalf("forgetful %v, deaf %v: got %v, want a violation of %q", cfg.forgetful, cfg.deaf, r.Violation, Entries)
		}
		t.Logf("forgetful %v, deaf %v: %v\n%v", cfg.forgetful, cfg.deaf, r, r.Trace)
	}
}

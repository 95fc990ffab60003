package model

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestLuaRunnerIsMiniredisEval: the checker's interpreter kept across
// scripts does what miniredis's own EVAL (a fresh interpreter per script)
// does: on random walks of every kind, and of the plain path (Config.Plain),
// with every fault (a lost reply, a Break and a step of the clock among
// them), each step leaves the same state and the same reply on both.
func TestLuaRunnerIsMiniredisEval(t *testing.T) {
	faults := Faults{Die: 1, Pause: 1, Lose: 1, Dup: 1, Forge: 1, Restart: 1, GiveUp: 1, Step: 1, Resend: 1, Break: 1}
	for _, tc := range []struct {
		kind  Kind
		plain bool
	}{{Efficiency, false}, {Correctness, false}, {Semaphore, false}, {Election, false}, {Efficiency, true}} {
		name := tc.kind.String()
		if tc.plain {
			name += ", plain"
		}
		t.Run(name, func(t *testing.T) {
			kind, f := tc.kind, faults
			if kind == Semaphore {
				f.Break = 0
			}
			c, ours := testChecker(t, Config{Kind: kind, Clients: 3, Limit: 2, Faults: f, Patience: 2000, Plain: tc.plain})
			c.cfg.nativeLua = true
			_, native := testChecker(t, c.cfg)
			for seed := range uint64(20) {
				walkBoth(t, c, ours, native, rand.New(rand.NewPCG(seed, 0)))
			}
		})
	}
}

// testChecker is cfg's checker and an executor on a miniredis of its own,
// closed when the test ends.
func testChecker(t testing.TB, cfg Config) (*checker, *executor) {
	t.Helper()
	c, err := newChecker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	xs, err := c.executors(1, newMemo(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(xs) })
	return c, xs[0]
}

// walkBoth takes a random walk, each move on both executors.
func walkBoth(t *testing.T, c *checker, ours, native *executor, rng *rand.Rand) {
	t.Helper()
	w := c.initial()
	for range 30 {
		ms := c.moves(w)
		if len(ms) == 0 {
			return
		}
		m, _, _ := c.pick(ours, w, ms, rng)
		a, oa := c.apply(ours, w, m)
		b, ob := c.apply(native, w, m)
		id := []int{0, 1, 2}
		if x, y := fmt.Sprintf("%s %s", a.encodeAs(id), show(oa.reply)), fmt.Sprintf("%s %s", b.encodeAs(id), show(ob.reply)); x != y {
			t.Fatalf("%s: got\n%s\nminiredis's EVAL:\n%s", m, x, y)
		}
		w = a
	}
}

package model

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkRestore compares the two ways to put a state found at depth 8
// back into miniredis to expand it: loading its keys, which Explore does,
// and replaying the path to it from the start.
func BenchmarkRestore(b *testing.B) {
	c, x := testChecker(b, Config{Kind: Correctness, Clients: 3, Faults: Faults{Die: 1, Restart: 1}})
	w, path := c.initial(), []move(nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		ms := c.moves(w)
		m := ms[rng.IntN(len(ms))]
		w, _ = c.apply(x, w, m)
		path = append(path, m)
	}
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			x.mini.load(w.rs)
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			r := c.initial()
			x.mini.load(r.rs)
			for _, m := range path {
				r, _ = c.apply(x, r, m)
			}
		}
	})
}

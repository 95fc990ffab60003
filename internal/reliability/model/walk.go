package model

import (
	"math/rand/v2"
	"slices"
	"sync"
)

// Walk takes walks random walks of up to depth moves each from the start
// (or Config.From), each seeded from seed and its number, and stops at the
// first violation. States counts the distinct states the walks reached.
func Walk(cfg Config, walks, depth int, seed uint64) (Result, error) {
	return check(cfg, func(c *checker, xs []*executor) Result {
		wk := &walker{c: c, seen: make(map[[2]uint64]struct{}), walks: walks}
		var wg sync.WaitGroup
		for _, x := range xs {
			wg.Go(func() { wk.work(x, depth, seed) })
		}
		wg.Wait()
		return Result{States: len(wk.seen), Steps: wk.tally.steps, Paths: wk.tally.paths, Depth: depth, Violation: wk.v,
			path: Schedule{wk.path}}
	})
}

// walker hands out walks to workers and gathers what they found.
type walker struct {
	c     *checker
	mu    sync.Mutex
	seen  map[[2]uint64]struct{}
	next  int
	walks int
	tally tally
	v     *Violation
	vn    int // the walk that found v: the lowest-numbered that found one
	path  []move
}

func (wk *walker) work(x *executor, depth int, seed uint64) {
	for {
		wk.mu.Lock()
		n := wk.next
		wk.next++
		stop := n >= wk.walks || wk.v != nil && n > wk.vn
		wk.mu.Unlock()
		if stop {
			return
		}
		wk.walk(x, depth, n, rand.New(rand.NewPCG(seed, uint64(n))))
	}
}

// walk takes walk number n.
func (wk *walker) walk(x *executor, depth, n int, rng *rand.Rand) {
	w := wk.c.origin()
	path := slices.Clone(wk.c.cfg.From.moves)
	var hs [][2]uint64
	var t tally
	for range depth {
		ms := wk.c.moves(w)
		if len(ms) == 0 {
			break
		}
		m, next, o := wk.c.pick(x, w, ms, rng)
		path = append(path, m)
		t.note(wk.c.paths(&o))
		if v := wk.c.judge(w, m, next, &o, true); v != nil {
			wk.report(v, path, n)
			return
		}
		w = next
		hs = append(hs, wk.c.hash(w))
	}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	t.steps = len(path) - len(wk.c.cfg.From.moves)
	wk.tally.add(t)
	for _, h := range hs {
		wk.seen[h] = struct{}{}
	}
}

// pick takes one of the moves ms enabled in w at random, or one of its
// variants that lose a reply, and returns it and what it did.
func (c *checker) pick(x *executor, w *world, ms []move, rng *rand.Rand) (move, *world, outcome) {
	m := ms[rng.IntN(len(ms))]
	n, o := c.apply(x, w, m)
	if vs := c.variants(w, m, &o); len(vs) > 0 {
		if k := rng.IntN(len(vs) + 1); k > 0 {
			m = vs[k-1]
			n, o = c.apply(x, w, m)
		}
	}
	return m, n, o
}

func (wk *walker) report(v *Violation, path []move, n int) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	wk.tally.steps += len(path) - len(wk.c.cfg.From.moves)
	if wk.v == nil || n < wk.vn {
		wk.v, wk.path, wk.vn = v, path, n
	}
}

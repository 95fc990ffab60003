package model

import (
	"math/rand/v2"
	"sync"
)

// Walk takes walks random walks of up to depth moves each from the start,
// each seeded from seed and its number, and stops at the first violation.
// States counts the distinct states the walks reached.
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
	w := wk.c.initial()
	var path []move
	var hs [][2]uint64
	var t tally
	for range depth {
		ms := wk.c.moves(w)
		if len(ms) == 0 {
			break
		}
		m := ms[rng.IntN(len(ms))]
		next, o := wk.c.apply(x, w, m)
		path = append(path, m)
		t.note(wk.c.paths(m, &o))
		if v := wk.c.judge(w, m, next, &o, true); v != nil {
			wk.report(v, path, n)
			return
		}
		w = next
		hs = append(hs, wk.c.hash(w))
	}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	t.steps = len(path)
	wk.tally.add(t)
	for _, h := range hs {
		wk.seen[h] = struct{}{}
	}
}

func (wk *walker) report(v *Violation, path []move, n int) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	wk.tally.steps += len(path)
	if wk.v == nil || n < wk.vn {
		wk.v, wk.path, wk.vn = v, path, n
	}
}

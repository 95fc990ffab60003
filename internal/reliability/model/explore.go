package model

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Explore explores every path of up to cfg.Depth moves from the start (or
// cfg.From), in breadth-first order with states deduplicated, and stops at
// the first depth where a step breaks an invariant: the violation it
// returns is one of the shortest. With cfg.EachInvariant it goes on to the
// bound, and returns the first violation of each invariant it finds, each
// one of the shortest of its invariant (Result.Counterexamples).
func Explore(cfg Config) (Result, error) {
	return check(cfg, func(c *checker, xs []*executor) Result {
		b := newBFS(c, xs)
		r := b.run()
		for _, f := range b.found {
			r.Counterexamples = append(r.Counterexamples, Counterexample{Violation: f.v, path: Schedule{b.path(f.parent, f.m)}})
		}
		if len(r.Counterexamples) > 0 {
			r.path = r.Counterexamples[0].path
		}
		return r
	})
}

// check runs cfg's checker with explore on a miniredis per worker, and
// times it; a violation comes with its trace.
func check(cfg Config, explore func(*checker, []*executor) Result) (Result, error) {
	c, err := newChecker(cfg)
	if err != nil {
		return Result{}, err
	}
	xs, err := c.executors(c.cfg.Workers, newMemo(memoLimit))
	if err != nil {
		return Result{}, err
	}
	defer closeAll(xs)
	start := time.Now()
	if err := c.prepare(xs[0]); err != nil {
		return Result{}, err
	}
	r := explore(c, xs)
	for _, x := range xs {
		r.Runs += x.runs
	}
	r.Elapsed = time.Since(start)
	if r.Violation != nil {
		r.Trace, err = c.trace(r.path.moves)
	}
	for i := 0; i < len(r.Counterexamples) && err == nil; i++ {
		r.Counterexamples[i].Trace, err = c.trace(r.Counterexamples[i].path.moves)
	}
	return r, err
}

// tally counts the moves a check took, and the rarer paths they took
// (Result.Paths).
type tally struct {
	steps int
	paths map[string]int
}

// note counts the paths one step took.
func (t *tally) note(paths []string) {
	for _, p := range paths {
		if t.paths == nil {
			t.paths = make(map[string]int)
		}
		t.paths[p]++
	}
}

// add adds u to t.
func (t *tally) add(u tally) {
	t.steps += u.steps
	for p, n := range u.paths {
		if t.paths == nil {
			t.paths = make(map[string]int)
		}
		t.paths[p] += n
	}
}

// node is a state of the frontier.
type node struct {
	w  *world
	id int32
}

// link is how a state was first reached: from parent, by m.
type link struct {
	parent int32
	m      move
}

// child is a state a worker reached from a frontier state.
type child struct {
	m move
	w *world
	h [2]uint64
	v *Violation
}

// bfs is one breadth-first exploration.
type bfs struct {
	c       *checker
	xs      []*executor
	visited map[[2]uint64]int32
	links   []link
	tally   tally
	found   []found // the first violation, or with EachInvariant each invariant's
}

// found is a violation v, the step m from state parent broke.
type found struct {
	link
	v *Violation
}

// done says whether the exploration has found what it looks for.
func (b *bfs) done() bool { return len(b.found) > 0 && !b.c.cfg.EachInvariant }

func newBFS(c *checker, xs []*executor) *bfs {
	return &bfs{c: c, xs: xs, visited: make(map[[2]uint64]int32)}
}

func (b *bfs) run() Result {
	w := b.c.origin()
	frontier := []node{{w, b.add(b.c.hash(w), link{parent: -1})}}
	depth := 0
	for ; depth < b.c.cfg.Depth && len(frontier) > 0 && !b.done(); depth++ {
		frontier = b.level(frontier)
	}
	r := Result{States: len(b.links), Steps: b.tally.steps, Paths: b.tally.paths, Depth: depth}
	if len(b.found) > 0 {
		r.Violation = b.found[0].v
	}
	return r
}

func (b *bfs) add(h [2]uint64, l link) int32 {
	id := int32(len(b.links))
	b.visited[h] = id
	b.links = append(b.links, l)
	return id
}

// batch is how many frontier states the workers expand between merges:
// memory stays bounded, and the order of merging (hence which path a state
// is first reached by) does not depend on the workers' timing.
const batch = 2048

// level expands the frontier and returns the next one.
func (b *bfs) level(frontier []node) []node {
	var next []node
	for lo := 0; lo < len(frontier) && !b.done(); lo += batch {
		part := frontier[lo:min(lo+batch, len(frontier))]
		kids := b.expand(part)
		next = b.merge(part, kids, next)
	}
	return next
}

// expand runs every move of every state in part, on the workers.
func (b *bfs) expand(part []node) [][]child {
	kids := make([][]child, len(part))
	ts := make([]tally, len(b.xs))
	var wg sync.WaitGroup
	for k, x := range b.xs {
		wg.Go(func() {
			for i := k; i < len(part); i += len(b.xs) {
				kids[i] = b.children(x, part[i].w, &ts[k])
			}
		})
	}
	wg.Wait()
	for _, t := range ts {
		b.tally.add(t)
	}
	return kids
}

// children are the states w's moves reach that are new, or break an
// invariant, with each move's variants that lose a reply; t counts the
// moves and the paths they took. (visited is only read while workers run.)
func (b *bfs) children(x *executor, w *world, t *tally) []child {
	var out []child
	var step func(m move)
	step = func(m move) {
		t.steps++
		n, o := b.c.apply(x, w, m)
		v := b.c.judge(w, m, n, &o, true)
		t.note(b.c.paths(&o))
		h := b.c.hash(n)
		if _, seen := b.visited[h]; !seen || v != nil {
			out = append(out, child{m: m, w: n, h: h, v: v})
		}
		for _, v := range b.c.variants(w, m, &o) {
			step(v)
		}
	}
	for _, m := range b.c.moves(w) {
		step(m)
	}
	return out
}

// merge adds part's new children to next, in order, and notes the first
// violation (with EachInvariant, of each invariant). A state that breaks
// one is not explored further.
func (b *bfs) merge(part []node, kids [][]child, next []node) []node {
	for i, cs := range kids {
		for _, k := range cs {
			if k.v != nil {
				if !b.done() && !slices.ContainsFunc(b.found, func(f found) bool { return f.v.Invariant == k.v.Invariant }) {
					b.found = append(b.found, found{link{parent: part[i].id, m: k.m}, k.v})
				}
				continue
			}
			if _, seen := b.visited[k.h]; !seen {
				next = append(next, node{k.w, b.add(k.h, link{parent: part[i].id, m: k.m})})
			}
		}
	}
	return next
}

// path is the moves from the start to state id, then m: Config.From's
// first.
func (b *bfs) path(id int32, m move) []move {
	var p []move
	for ; id > 0; id = b.links[id].parent {
		p = append(p, b.links[id].m)
	}
	slices.Reverse(p)
	return append(append(slices.Clone(b.c.cfg.From.moves), p...), m)
}

// Schedule is a path of moves from the start: one Explore or Walk found, or
// a random one (Schedules).
type Schedule struct{ moves []move }

func (s Schedule) String() string {
	parts := make([]string, len(s.moves))
	for i, m := range s.moves {
		parts[i] = m.String()
	}
	return strings.Join(parts, ", ")
}

// Schedule returns the path of the trace r found, to replay it.
func (r Result) Schedule() Schedule { return r.path }

package model

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Config is one check: who contends for what, under which faults, how far.
type Config struct {
	Kind Kind
	// Clients is how many participants contend: 2 to 4.
	Clients int
	// Limit is a semaphore's limit.
	Limit int
	// Scripts are the scripts run; the zero value runs Leasekit().
	Scripts Scripts
	// Faults are the faults one path may hold.
	Faults Faults
	// Cycles bounds the acquires each participant begins; 0: no bound.
	Cycles int
	// ArriveAtStart makes participants begin acquires only before the
	// clock first moves: no newcomer arrives later.
	ArriveAtStart bool
	// LapsedFIFO holds the grant of a lock whose lease lapsed (its holder
	// died, or paused past its ttl) to the first-live-waiter rule too. The
	// scripts as of issue 32 do not serve the queue's head then (the waiter
	// whose timer fires first, or a newcomer's probe, takes the lock): a
	// check of something else leaves it out until they do.
	LapsedFIFO bool
	// Depth bounds the moves of a path Explore explores.
	Depth int
	// Workers is how many goroutines explore, each with a miniredis of its
	// own; 0: GOMAXPROCS.
	Workers int

	// nativeLua runs scripts in miniredis's own EVAL (a test compares).
	nativeLua bool
}

// Result is what a check explored, and the first violation it found.
type Result struct {
	// States is how many distinct states were reached, Steps how many
	// moves were taken, and Runs how many server operations ran (the
	// others came from the memo).
	States, Steps, Runs int
	// Depth is the longest path explored.
	Depth int
	// Violation is the first broken invariant found, with the path to it.
	Violation *Violation
	Trace     *Trace
	Elapsed   time.Duration
	path      Schedule
}

func (r Result) String() string {
	s := fmt.Sprintf("%d states, %d steps (%d server runs), depth %d, %v", r.States, r.Steps, r.Runs, r.Depth, r.Elapsed.Round(time.Millisecond))
	if r.Violation != nil {
		s += "; violation: " + r.Violation.Error()
	}
	return s
}

// base is the clock a check starts at, ms since 1970.
const base = 1_700_000_000_000

// checker runs one Config.
type checker struct {
	cfg   Config
	p     protocol
	seeds [2]maphash.Seed
}

func newChecker(cfg Config) (*checker, error) {
	switch {
	case cfg.Clients < 1 || cfg.Clients > 4:
		return nil, errors.New("model: Clients must be 1 to 4")
	case cfg.Kind == Semaphore && cfg.Limit < 1:
		return nil, errors.New("model: a semaphore needs a Limit")
	}
	if cfg.Scripts == (Scripts{}) {
		cfg.Scripts = Leasekit()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	return &checker{cfg: cfg, p: protocol{kind: cfg.Kind, limit: cfg.Limit, src: cfg.Scripts},
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}, nil
}

// initial is the world before any move.
func (c *checker) initial() *world {
	return &world{rs: redisState{clock: base, micros: base * 1000}, clients: make([]client, c.cfg.Clients),
		left: c.cfg.Faults, freeSince: -1, lonely: -1}
}

// executors start a miniredis for each worker, sharing one memo.
func (c *checker) executors(n int, m *memo) ([]*executor, error) {
	xs := make([]*executor, n)
	for i := range xs {
		s, err := newMini(c.p.keys(), base, c.cfg.nativeLua)
		if err != nil {
			closeAll(xs)
			return nil, err
		}
		xs[i] = &executor{b: s, mini: s, memo: m}
	}
	return xs, nil
}

func closeAll(xs []*executor) {
	for _, x := range xs {
		if x != nil {
			x.b.close()
		}
	}
}

// memoLimit bounds the results the memo keeps (a few hundred bytes each).
const memoLimit = 1 << 18

// Explore explores every path of up to cfg.Depth moves from the start, in
// breadth-first order with states deduplicated, and stops at the first
// depth where a step breaks an invariant: the violation it returns is one
// of the shortest.
func Explore(cfg Config) (Result, error) {
	return check(cfg, func(c *checker, xs []*executor) Result {
		b := newBFS(c, xs)
		r := b.run()
		if r.Violation != nil {
			r.path.moves = b.path(b.found.parent, b.found.m)
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
	r := explore(c, xs)
	for _, x := range xs {
		r.Runs += x.runs
	}
	r.Elapsed = time.Since(start)
	if r.Violation != nil {
		r.Trace, err = c.trace(r.path.moves)
	}
	return r, err
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
	steps   int
	found   *link
	v       *Violation
}

func newBFS(c *checker, xs []*executor) *bfs {
	return &bfs{c: c, xs: xs, visited: make(map[[2]uint64]int32)}
}

func (b *bfs) run() Result {
	w := b.c.initial()
	frontier := []node{{w, b.add(b.c.hash(w), link{parent: -1})}}
	depth := 0
	for ; depth < b.c.cfg.Depth && len(frontier) > 0 && b.v == nil; depth++ {
		frontier = b.level(frontier)
	}
	return Result{States: len(b.links), Steps: b.steps, Depth: depth, Violation: b.v}
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
	for lo := 0; lo < len(frontier) && b.v == nil; lo += batch {
		part := frontier[lo:min(lo+batch, len(frontier))]
		kids := b.expand(part)
		next = b.merge(part, kids, next)
	}
	return next
}

// expand runs every move of every state in part, on the workers.
func (b *bfs) expand(part []node) [][]child {
	kids := make([][]child, len(part))
	steps := make([]int, len(b.xs))
	var wg sync.WaitGroup
	for k, x := range b.xs {
		wg.Go(func() {
			for i := k; i < len(part); i += len(b.xs) {
				kids[i] = b.children(x, part[i].w, &steps[k])
			}
		})
	}
	wg.Wait()
	for _, n := range steps {
		b.steps += n
	}
	return kids
}

// children are the states w's moves reach that are new, or break an
// invariant; steps counts the moves. (visited is only read while workers
// run.)
func (b *bfs) children(x *executor, w *world, steps *int) []child {
	var out []child
	for _, m := range b.c.moves(w) {
		*steps++
		n, o := b.c.apply(x, w, m)
		v := b.c.judge(w, m, n, &o, true)
		h := b.c.hash(n)
		if _, seen := b.visited[h]; !seen || v != nil {
			out = append(out, child{m: m, w: n, h: h, v: v})
		}
	}
	return out
}

// merge adds part's new children to next, in order, and notes the first
// violation.
func (b *bfs) merge(part []node, kids [][]child, next []node) []node {
	for i, cs := range kids {
		for _, k := range cs {
			if k.v != nil {
				if b.v == nil {
					b.v, b.found = k.v, &link{parent: part[i].id, m: k.m}
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

// path is the moves from the start to state id, then m.
func (b *bfs) path(id int32, m move) []move {
	var p []move
	for ; id > 0; id = b.links[id].parent {
		p = append(p, b.links[id].m)
	}
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
	return append(p, m)
}

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
		return Result{States: len(wk.seen), Steps: wk.steps, Depth: depth, Violation: wk.v, path: Schedule{wk.path}}
	})
}

// walker hands out walks to workers and gathers what they found.
type walker struct {
	c     *checker
	mu    sync.Mutex
	seen  map[[2]uint64]struct{}
	next  int
	walks int
	steps int
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
	for range depth {
		ms := wk.c.moves(w)
		if len(ms) == 0 {
			break
		}
		m := ms[rng.IntN(len(ms))]
		next, o := wk.c.apply(x, w, m)
		path = append(path, m)
		if v := wk.c.judge(w, m, next, &o, true); v != nil {
			wk.report(v, path, n)
			return
		}
		w = next
		hs = append(hs, wk.c.hash(w))
	}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	wk.steps += len(path)
	for _, h := range hs {
		wk.seen[h] = struct{}{}
	}
}

func (wk *walker) report(v *Violation, path []move, n int) {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	wk.steps += len(path)
	if wk.v == nil || n < wk.vn {
		wk.v, wk.path, wk.vn = v, path, n
	}
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

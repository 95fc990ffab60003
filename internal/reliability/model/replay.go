package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Schedules are n random walks of up to depth moves, seeded from seed,
// that break no invariant on miniredis and let at most wait ms of clock
// pass: schedules short enough to replay on a real server.
func Schedules(cfg Config, n, depth int, seed uint64, wait int64) ([]Schedule, error) {
	c, err := newChecker(cfg)
	if err != nil {
		return nil, err
	}
	xs, err := c.executors(1, newMemo(memoLimit))
	if err != nil {
		return nil, err
	}
	defer closeAll(xs)
	var out []Schedule
	for k := uint64(0); len(out) < n && k < uint64(100*n); k++ {
		if s, ok := c.schedule(xs[0], depth, wait, rand.New(rand.NewPCG(seed, k))); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// schedule takes one random walk that advances the clock by at most wait
// ms; ok is false when it broke an invariant.
func (c *checker) schedule(x *executor, depth int, wait int64, rng *rand.Rand) (Schedule, bool) {
	w := c.initial()
	var s Schedule
	for range depth {
		var ms []move
		for _, m := range c.moves(w) {
			if m.kind != mAdvance || c.nextDeadline(w)-base <= wait {
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 {
			break
		}
		m, n, o := c.pick(x, w, ms, rng)
		if c.judge(w, m, n, &o, true) != nil {
			return s, false
		}
		s.moves, w = append(s.moves, m), n
	}
	return s, true
}

// ParseSchedule is the schedule s names as Schedule.String prints it
// ("A probe, forge to B, B receive #0"): moves each of which must be
// enabled in turn from the start of a check of cfg, which it plays on
// miniredis to know.
func ParseSchedule(cfg Config, s string) (Schedule, error) {
	c, err := newChecker(cfg)
	if err != nil {
		return Schedule{}, err
	}
	xs, err := c.executors(1, newMemo(0))
	if err != nil {
		return Schedule{}, err
	}
	defer closeAll(xs)
	w := c.initial()
	var out Schedule
	for _, name := range strings.Split(s, ", ") {
		m, ok := c.named(xs[0], w, name)
		if !ok {
			return Schedule{}, fmt.Errorf("model: move %d, %q, is not enabled: %s", len(out.moves)+1, name, describe(w, base))
		}
		w, _ = c.apply(xs[0], w, m)
		out.moves = append(out.moves, m)
	}
	return out, nil
}

// named is the move called name enabled in w, or one of its variants that
// lose a reply.
func (c *checker) named(x *executor, w *world, name string) (move, bool) {
	for _, m := range c.moves(w) {
		if m.String() == name {
			return m, true
		}
		_, o := c.apply(x, w, m)
		if k := slices.IndexFunc(c.variants(w, m, &o), func(v move) bool { return v.String() == name }); k >= 0 {
			return c.variants(w, m, &o)[k], true
		}
	}
	return move{}, false
}

// Replay runs schedule s on the real server client is connected to (which
// it empties), and the same moves on miniredis beside it. It returns the
// trace of the real run, whose Violation is the first invariant the real
// run broke; the invariants bound in time are left out, since the replay's
// own delays count on a real clock. It fails when a step leaves the two
// servers in different states (who holds, who is queued, what is in
// flight): a difference between miniredis and Redis, or a real clock that
// let a lease run out early (a stall of about a ttl).
func Replay(ctx context.Context, cfg Config, s Schedule, client *redis.Client) (t *Trace, err error) {
	c, err := newChecker(cfg)
	if err != nil {
		return nil, err
	}
	xs, err := c.executors(1, newMemo(0))
	if err != nil {
		return nil, err
	}
	defer closeAll(xs)
	r, err := newReal(ctx, client, c.p.keys(), c.p.marks())
	if err != nil {
		return nil, err
	}
	defer r.close()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return c.replay(s, xs[0], &executor{b: r})
}

func (c *checker) replay(s Schedule, sim, live *executor) (*Trace, error) {
	t := &Trace{Kind: c.cfg.Kind}
	w := c.initial()
	lw := c.initial()
	lw.rs = live.b.read()
	origin := lw.rs.clock
	for i, m := range s.moves {
		if r, ok := live.b.(*real); ok && m.kind == mAdvance {
			r.gap = c.nextDeadline(w) - w.rs.clock
		}
		n, o := c.apply(sim, w, m)
		c.judge(w, m, n, &o, true)
		ln, lo := c.apply(live, lw, m)
		t.Violation = c.judge(lw, m, ln, &lo, false)
		t.Steps = append(t.Steps, c.step(ln, origin, m, &lo))
		if a, b := c.sketch(n), c.sketch(ln); a != b {
			return t, fmt.Errorf("model: step %d (%s): miniredis and redis-server differ:\n  miniredis:    %s\n  redis-server: %s", i+1, m, a, b)
		}
		if t.Violation != nil {
			break
		}
		w, lw = n, ln
	}
	return t, nil
}

// sketch is what a replay compares of two worlds: who holds what, who is
// queued, the participants' phases, and the messages in flight; not
// clocks, ttls or tokens.
func (c *checker) sketch(w *world) string {
	var b strings.Builder
	var holders []string
	for _, g := range c.p.holders(w.rs) {
		holders = append(holders, g.owner)
	}
	slices.Sort(holders) // permits by expiry: the clocks differ
	b.WriteString(strings.Join(holders, " "))
	if q := w.rs.key(c.p.queue()); q != nil {
		for i := 0; i < len(q.items); i += 2 {
			b.WriteString("[" + q.items[i] + "]")
		}
	}
	for i := range w.clients {
		cl := &w.clients[i]
		fmt.Fprintf(&b, " | %s %s p%v c%d g%d q%v r%d o%v s%v h%v l%v m%d %s", name(i), phaseNames[cl.phase], cl.paused, cl.cycle,
			cl.e.gen, cl.queued, w.rank(i), cl.office, cl.serveUntil != 0, cl.handed, cl.pending != nil, cl.plain,
			c.p.parseValue(cl.value).owner)
	}
	for _, m := range w.flight {
		ticket, _, _ := strings.Cut(m.text, " ")
		fmt.Fprintf(&b, " >%s %s", name(m.to), ticket)
	}
	return b.String()
}

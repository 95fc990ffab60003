package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Trace is a path of moves from the start, replayed step by step: what each
// move ran, at which clock, and the keys after it.
type Trace struct {
	// Kind is what the participants contended for.
	Kind  Kind
	Steps []Step
	// Violation is the invariant the last step broke, if any.
	Violation *Violation
}

// Step is one move of a trace.
type Step struct {
	At      int64  // ms since the check's start, on the participants' clock
	Move    string // who did what
	Op      string // the server operation it ran, and its reply; "" for none
	Keys    []string
	Clients string // each participant's phase, and the messages in flight
}

// trace replays path from the start on a fresh miniredis and records each
// step; the last step's violation, if it breaks one, comes with it.
func (c *checker) trace(path []move) (*Trace, error) {
	xs, err := c.executors(1, newMemo(0))
	if err != nil {
		return nil, err
	}
	defer closeAll(xs)
	t := &Trace{Kind: c.cfg.Kind}
	w := c.initial()
	for _, m := range path {
		n, o := c.apply(xs[0], w, m)
		t.Violation = c.judge(w, m, n, &o, true)
		t.Steps = append(t.Steps, c.step(n, base, m, &o))
		w = n
	}
	return t, nil
}

// step records move m, which did o and led to n; times are counted from
// origin (ms).
func (c *checker) step(n *world, origin int64, m move, o *outcome) Step {
	s := Step{At: n.local() - origin, Move: m.String(), Clients: describe(n, origin)}
	if o.op != "" {
		s.Op = o.op + " -> " + show(o.reply)
	}
	for _, k := range n.rs.keys {
		s.Keys = append(s.Keys, showKey(k))
	}
	return s
}

// describe is each participant's phase, and the messages in flight; times
// count from origin.
func describe(w *world, origin int64) string {
	var parts []string
	if w.skew != 0 {
		parts = append(parts, fmt.Sprintf("the server's clock %+d ms", w.skew))
	}
	for i := range w.clients {
		cl := &w.clients[i]
		s := name(i) + " " + phaseNames[cl.phase]
		switch {
		case cl.phase == holding, cl.phase == drawing:
			s += " " + cl.value
		case cl.phase == stamping:
			s += " " + cl.value + ", token " + cl.token
		case cl.phase == sleeping:
			s += fmt.Sprintf(" until t=%d", cl.timer-origin)
		}
		if cl.waiting() && cl.giveUpAt != 0 {
			s += fmt.Sprintf(" (gives up at t=%d)", cl.giveUpAt-origin)
		}
		if cl.handed {
			s += fmt.Sprintf(" (handed over to its entry .%d)", cl.e.gen)
		}
		if cl.serveUntil != 0 {
			s += " (serving the queue on)"
		}
		switch cl.plain {
		case refreshMissed:
			s += " (its SET IFEQ missed: refresh.lua next)"
		case releaseMissed:
			s += " (its DELEX missed: release.lua next"
			if cl.resent != nil {
				s += ", the DELEX sent twice"
			}
			s += ")"
		}
		for _, t := range cl.took {
			s += fmt.Sprintf(" (took %s in acquire %d)", t.value, t.cycle)
		}
		if cl.waiting() && cl.queued {
			s += fmt.Sprintf(" (queued %d.)", w.rank(i))
		}
		if cl.pending != nil {
			s += " (its reply to " + cl.pending.op + " lost: it sends it again)"
		}
		if cl.paused {
			s += " (paused)"
		}
		parts = append(parts, s)
	}
	if p := &w.op; p.busy() {
		s := "the operator breaking the lock, first sent against " + p.target.String()
		if p.target == (grant{}) {
			s = "the operator breaking the lock, first sent when no lease held it"
		}
		if p.pending != nil {
			s += " (its reply lost: it sends it again)"
		}
		if p.serveUntil != 0 {
			s += " (serving the queue on)"
		}
		parts = append(parts, s)
	}
	for _, m := range w.flight {
		parts = append(parts, fmt.Sprintf("in flight to %s: %q", name(m.to), m.text))
	}
	if w.source != "" {
		parts = append(parts, "the token source drew "+w.source+" last")
	}
	return strings.Join(parts, "; ")
}

func (t *Trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d steps (t in ms from the start; keys after each step):\n", t.Kind, len(t.Steps))
	for i, s := range t.Steps {
		fmt.Fprintf(&b, "%2d. t=%-6d %s\n", i+1, s.At, s.Move)
		if s.Op != "" {
			fmt.Fprintf(&b, "              %s\n", s.Op)
		}
		for _, k := range s.Keys {
			fmt.Fprintf(&b, "              %s\n", k)
		}
		fmt.Fprintf(&b, "              [%s]\n", s.Clients)
	}
	if t.Violation != nil {
		fmt.Fprintf(&b, "VIOLATION of %q: %s\n", t.Violation.Invariant, t.Violation.Detail)
	}
	return b.String()
}

// showKey formats a key as a trace shows it.
func showKey(k rkey) string {
	var v string
	switch k.typ {
	case "string":
		v = strconv.Quote(k.items[0])
	case "zset":
		var es []string
		for i := 0; i+1 < len(k.items); i += 2 {
			es = append(es, strconv.Quote(k.items[i])+" @"+k.items[i+1])
		}
		v = "[" + strings.Join(es, ", ") + "]"
	default:
		v = fmt.Sprintf("%q", k.items)
	}
	ttl := "no ttl"
	if k.ttl >= 0 {
		ttl = fmt.Sprintf("ttl %d", k.ttl)
	}
	return fmt.Sprintf("%s = %s (%s)", k.name, v, ttl)
}

// show formats a reply.
func show(r any) string {
	switch v := r.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = show(e)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case error:
		return "error " + strconv.Quote(v.Error())
	}
	return fmt.Sprint(r)
}

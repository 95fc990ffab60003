package model

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
)

// The participants are alike: a state and the same state with their names
// permuted behave alike (every name in the keys and messages is a
// participant's letter, A to D, and no other capital letter appears in
// them). So the explorer deduplicates states up to such a permutation: a
// state's identity is the least of its encodings under the permutations
// that order the participants by what they are doing. The messages in
// flight to one participant are a sequence (they arrive in the order they
// were published, and its waiter reads the oldest first: receive); those
// to different participants are not ordered.

// hash is w's identity for deduplication.
func (c *checker) hash(w *world) [2]uint64 {
	var best []byte
	for _, p := range c.perms(w) {
		if b := w.encodeAs(p); best == nil || bytes.Compare(b, best) < 0 {
			best = b
		}
	}
	return [2]uint64{maphash.Bytes(c.seeds[0], best), maphash.Bytes(c.seeds[1], best)}
}

// perms are the permutations (old index -> new index) that sort the
// participants by their state without names, each order of the ties.
func (c *checker) perms(w *world) [][]int {
	n := len(w.clients)
	order := make([]int, n)
	sigs := make([]string, n)
	for i := range order {
		order[i] = i
		sigs[i] = string(w.clientBytes(nil, i, func(s string) string { return anonymous(s) }))
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(sigs[a], sigs[b]) })
	out := [][]int{nil}
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && sigs[order[hi]] == sigs[order[lo]] {
			hi++
		}
		out = extend(out, order[lo:hi])
		lo = hi
	}
	for _, p := range out {
		inv := make([]int, n)
		for pos, old := range p {
			inv[old] = pos
		}
		copy(p, inv)
	}
	return out
}

// extend appends every order of group (old indices) to each partial order
// in out (new position -> old index).
func extend(out [][]int, group []int) [][]int {
	var next [][]int
	for _, g := range orders(group) {
		for _, o := range out {
			next = append(next, append(slices.Clone(o), g...))
		}
	}
	return next
}

// orders are every order of xs.
func orders(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{slices.Clone(xs)}
	}
	var out [][]int
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, o := range orders(rest) {
			out = append(out, append([]int{xs[i]}, o...))
		}
	}
	return out
}

// anonymous is s with every participant's name replaced by '?'.
func anonymous(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'D' {
			return '?'
		}
		return r
	}, s)
}

// encodeAs is w's canonical form with participant i renamed p[i].
func (w *world) encodeAs(p []int) []byte {
	rename := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'A' && int(r-'A') < len(p) {
				return 'A' + rune(p[r-'A'])
			}
			return r
		}, s)
	}
	b := w.rs.encodeAs(nil, rename)
	order := make([]int, len(p))
	for old, pos := range p {
		order[pos] = old
	}
	for _, old := range order {
		b = w.clientBytes(b, old, rename)
	}
	fl := make([]string, len(w.flight))
	for i, m := range w.flight {
		fl[i] = string(rune('0'+p[m.to])) + rename(m.text)
	}
	slices.SortStableFunc(fl, func(a, b string) int { return int(a[0]) - int(b[0]) })
	for _, m := range fl {
		b = append(b, '>')
		b = append(b, m...)
	}
	return w.tail(b, rename)
}

// encodeAs is st's canonical form with names renamed: sorted sets and the
// subscriptions sorted again.
func (st redisState) encodeAs(b []byte, rename func(string) string) []byte {
	r := redisState{clock: st.clock, micros: st.micros, keys: make([]rkey, len(st.keys))}
	for i, k := range st.keys {
		k.items = slices.Clone(k.items)
		for j := range k.items {
			k.items[j] = rename(k.items[j])
		}
		if k.typ == "zset" {
			sortPairs(k.items)
		}
		r.keys[i] = k
	}
	for _, s := range st.subs {
		r.subs = append(r.subs, rename(s))
	}
	slices.Sort(r.subs)
	return r.encode(b)
}

// sortPairs sorts a sorted set's members and scores (integers, as the
// scripts write them) by score, then member.
func sortPairs(items []string) {
	type pair struct{ m, s string }
	ps := make([]pair, len(items)/2)
	for i := range ps {
		ps[i] = pair{items[2*i], items[2*i+1]}
	}
	slices.SortFunc(ps, func(a, b pair) int {
		if c := compareNumbers(a.s, b.s); c != 0 {
			return c
		}
		return strings.Compare(a.m, b.m)
	})
	for i, p := range ps {
		items[2*i], items[2*i+1] = p.m, p.s
	}
}

// compareNumbers compares two non-negative integers in decimal.
func compareNumbers(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// clientBytes appends participant i's state to b, its names renamed.
func (w *world) clientBytes(b []byte, i int, rename func(string) string) []byte {
	return w.encodeClient(b, &w.clients[i], rename)
}

// encodeClient appends c, a participant of w, to b, its names renamed:
// its place among those the checker saw queue, not its seq; the token it
// drew (Config.Source); and the command whose reply it lost, with what it
// needs to send it again.
func (w *world) encodeClient(b []byte, c *client, rename func(string) string) []byte {
	b = append(b, '|', byte(c.phase), bit(c.paused), bit(c.subscribed), bit(c.queued), bit(c.office), bit(c.handed), byte(w.rankOf(c.seq)),
		bit(c.lone), bit(c.waiter), byte(c.plain))
	if r := c.resent; r != nil {
		b = append(b, '^', bit(r.held), bit(r.deleted))
	}
	b = append(b, c.token...)
	b = append(b, ' ')
	for _, v := range []int64{int64(c.cycle), int64(c.e.gen), c.e.server, c.e.sent, c.timer, c.deadline, c.serveUntil, c.giveUpAt, c.plainAt} {
		b = strconv.AppendInt(b, v, 10)
		b = append(b, ' ')
	}
	b = append(b, c.e.place...)
	b = append(b, ' ')
	b = append(b, rename(c.value)...)
	b = append(b, ' ')
	b = append(b, rename(c.resign)...)
	for _, t := range c.took {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(t.cycle), 10)
		b = append(b, '=')
		b = append(b, rename(t.value)...)
	}
	return w.encodeResend(b, c.pending, rename)
}

// encodeResend appends r, a command whose reply was lost, to b (nothing
// for none), its names renamed: what its move needs to resume.
func (w *world) encodeResend(b []byte, r *resend, rename func(string) string) []byte {
	if r == nil {
		return b
	}
	b = append(b, '~', byte(r.move.kind), byte(r.move.lose), bit(r.held), bit(r.deleted))
	b = strconv.AppendInt(b, r.at, 10)
	for _, reply := range r.replies {
		b = append(b, ' ')
		b = append(b, rename(show(reply))...)
	}
	b = append(b, ' ')
	b = append(b, rename(r.text)...)
	return w.encodeClient(b, &r.pre, rename)
}

// tail appends what is not a participant's to b, its names renamed: the
// token source's last token among them.
func (w *world) tail(b []byte, rename func(string) string) []byte {
	l := w.left
	b = append(b, '!', byte(l.Die), byte(l.Pause), byte(l.Lose), byte(l.Dup), byte(l.Forge), byte(l.Restart), byte(l.GiveUp), byte(l.Step), byte(l.Resend), byte(l.Break))
	b = append(b, w.top...)
	b = append(b, ' ')
	b = append(b, w.topGrant...)
	b = append(b, ' ')
	b = append(b, w.source...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, w.freeSince, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, w.lonely, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, w.skew, 10)
	b = append(b, bit(w.back), ' ')
	b = append(b, rename(w.op.target.owner+":"+w.op.target.token)...)
	b = strconv.AppendInt(b, w.op.serveUntil, 10)
	b = w.encodeResend(b, w.op.pending, rename)
	return append(b, w.term...)
}

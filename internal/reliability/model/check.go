package model

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/leasekit/leasekit/scripts"
)

// The invariants, named as Violation.Invariant names them. The package doc
// states each.
const (
	OneGrant   = "one grant"
	Looks      = "looks tell the truth"
	FIFO       = "first live waiter"
	Entries    = "entries end with their waiters"
	Tokens     = "tokens increase"
	LeaderRead = "leader read"
	Replies    = "replies parse"
	// NoFalseLoss: a release whose first send ended the sender's lease
	// reports that it did, though its reply was lost and the command sent
	// again; so does a Break that broke a live lease.
	NoFalseLoss = "a release that took effect says so"
	// Breaks: a Break ends only the grant that was live when the operator
	// first sent it.
	Breaks = "a break ends the grant it was sent against"
	// ResentDelete: a release whose plain DELEX was sent again after its
	// reply was lost (Config.Plain) says released only of a lease the
	// server held when the DELEX was first sent. It is Looks for that one
	// report, counted apart: internal/lease's plain.go documents that it
	// may say released of a lease already gone then, and a check that
	// lets that pass still holds every other look to Looks.
	ResentDelete = "a release after a resent DELEX says released of a held lease"
)

// Violation is an invariant a step broke.
type Violation struct {
	// Invariant names it: OneGrant, Looks, FIFO, Entries, Tokens,
	// LeaderRead, Replies, NoFalseLoss, Breaks or ResentDelete.
	Invariant string
	// Detail says who broke it, and how.
	Detail string
}

func (v *Violation) Error() string { return v.Invariant + ": " + v.Detail }

// judge checks the step from w to n, which did o, against the invariants,
// and updates what the checker tracks in n. Time-bound invariants (a free
// resource goes to a waiter within a second; a queue without live waiters
// ends within its bound) are left out when timed is false: on a real server
// the checker's own delays count.
func (c *checker) judge(w *world, _ move, n *world, o *outcome, timed bool) *Violation {
	m := o.move // a resend is judged as the move it resumes
	if o.err != nil {
		return &Violation{Replies, fmt.Sprintf("%s could not read the reply of %s: %v", who(m), o.op, o.err)}
	}
	if v := c.judgeBreak(o); v != nil {
		return v
	}
	if v := c.judgeLook(m, o); v != nil {
		return v
	}
	if v := c.judgeStamp(w, m, n, o); v != nil {
		return v
	}
	c.queueLost(m, n, o)
	if v := c.judgeGrants(w, m, n, o); v != nil {
		return v
	}
	if v := c.judgeElection(n, o); v != nil {
		return v
	}
	if v := c.judgeLeftovers(w, m, o); v != nil {
		return v
	}
	if !timed {
		return nil
	}
	if v := c.judgeWaitingTime(n); v != nil {
		return v
	}
	return c.judgeQueueLife(n)
}

// queueLost notes in n that no entry is queued when the step lost the
// queue: a restart without persistence, or the queue's expiry (its waiters
// paused past it, or the server's clock stepped past it). Each loses the
// order, as documented.
func (c *checker) queueLost(m move, n *world, o *outcome) {
	q := c.p.queue()
	expired := (m.kind == mAdvance || m.kind == mStep) && o.before.key(q) != nil && o.after.key(q) == nil
	if m.kind == mRestart || expired {
		for i := range n.clients {
			n.clients[i].queued = false
		}
	}
}

// who names the mover of m.
func who(m move) string {
	switch {
	case m.who == operatorWho:
		return "the operator"
	case m.who < 0:
		return "the environment"
	}
	return name(int(m.who))
}

// judgeBreak: a Break, first sent or sent again after its reply was lost,
// ends only the grant that was live when the operator first sent it (its
// target): a grant made after that, such as the one the first send handed
// to the first waiter, is not the Break's to end, or two holders run at
// once. And it reports whether it broke a live lease as its first send
// found it: sent again, it must not say it broke none (NoFalseLoss).
func (c *checker) judgeBreak(o *outcome) *Violation {
	if !o.broke {
		return nil
	}
	again := ""
	if o.replay != nil {
		again = ", sent again after its reply was lost,"
	}
	after := c.p.holders(o.after)
	for _, g := range c.p.holders(o.before) {
		if g == o.target || slices.Contains(after, g) {
			continue
		}
		first := "when no live lease held the lock"
		if o.target != (grant{}) {
			first = "against " + o.target.String()
		}
		s := fmt.Sprintf("the operator's Break%s ended %s's grant, made after the Break was first sent (%s)", again, g, first)
		if len(after) == 1 {
			s += fmt.Sprintf(", and handed the lock to %s: %s and %s were both granted it", after[0], g.owner, after[0].owner)
		}
		return &Violation{Breaks, s}
	}
	if b := o.broken; b != nil {
		live := o.target != grant{}
		switch {
		case live && !*b && o.replay != nil:
			return &Violation{NoFalseLoss, fmt.Sprintf("the operator's Break%s said it broke no live lease: its first send broke %s's",
				again, o.target)}
		case live != *b:
			return &Violation{Looks, fmt.Sprintf("the operator's Break%s said broken=%v, and a live lease held the lock when it was first sent: %v",
				again, *b, live)}
		}
	}
	return nil
}

// judgeLook: a holder's look at its grant (refresh, release) says it holds
// it exactly when the server held it just before; a grant a participant is
// told its own command made is on the server just after, and so is a grant
// a reply says its call handed on. A look whose reply came before a lost
// one (a later command's), and a release sent again after its reply was
// lost, tell what the server held before the move's first send: a release
// that took effect says so (NoFalseLoss), though the second send finds the
// lease gone or handed on. (A refresh sent again tells what it finds: the
// lease as it is now.) A stamp (Config.Source) says held when the server
// held the grant it stamps, or the one it stores with the mark a stamp
// leaves (its first send stored it), not that grant alone: the scripts
// may have made it. Under Config.Plain, a release whose plain DELEX was
// sent again (plain.go) and whose script found the lease gone or another
// owner's says released: that tells what the server held before the
// DELEX's first send (ResentDelete); one whose first DELEX deleted the
// grant says released (NoFalseLoss); otherwise neither DELEX changed
// anything, and its script's reply is judged as any release's.
func (c *checker) judgeLook(m move, o *outcome) *Violation {
	if l := o.look; l != nil {
		held, when := c.p.heldAs(o.before, l.value), "just before"
		if l.stamped != "" {
			held = held || c.p.heldAs(o.before, l.stamped) && o.before.key(scripts.StampKey(lockKey, l.stamped)) != nil
		}
		r := o.replay
		if r != nil && (l.release || r.move.lose > 1) {
			held, when = r.held, "before its first send"
		}
		switch d := l.resent; {
		case d != nil && d.deleted && !l.held:
			return &Violation{NoFalseLoss, fmt.Sprintf("%s's release of %s said it was not held (%s -> %s): "+
				"its DELEX's first send, whose reply was lost, deleted it", who(m), l.value, o.op, show(o.reply))}
		case d != nil && o.resentDelete && !d.held:
			return &Violation{ResentDelete, fmt.Sprintf("%s's release of %s said it was released (%s -> %s), "+
				"and the server did not hold it when its DELEX, sent again after its reply was lost, was first sent",
				who(m), l.value, o.op, show(o.reply))}
		case d != nil && o.resentDelete: // held when the DELEX was first sent
		case r != nil && r.move.lose == 1 && l.release && held && !l.held:
			return &Violation{NoFalseLoss, fmt.Sprintf("%s's release of %s, sent again after its reply was lost, said it was not held: "+
				"its first send released it", who(m), l.value)}
		case held != l.held:
			return &Violation{Looks, fmt.Sprintf("%s's %s said held=%v of %s, and the server held it %s: %v",
				who(m), o.op, l.held, l.value, when, held)}
		}
	}
	if o.self != "" && !c.p.heldAs(o.after, o.self) {
		return &Violation{Looks, fmt.Sprintf("%s was told %s granted it %s, which the server does not hold", who(m), o.op, o.self)}
	}
	for _, t := range o.handed {
		if hs := c.p.holders(o.after); len(hs) != 1 || t != "-" && hs[0].token != t || t == "-" && hs[0].token != "" {
			return &Violation{Looks, fmt.Sprintf("%s's %s said it handed the lock on with token %s, and the server holds %v",
				who(m), o.op, t, hs)}
		}
	}
	return nil
}

// judgeGrants checks every grant the step made. A step of the clock makes
// none: a lapsed lease that a step back brings to life again was granted
// before, and judged then. Nor does a stamp (Config.Source): it replaces
// its owner's grant with its own (judgeStamp).
func (c *checker) judgeGrants(w *world, m move, n *world, o *outcome) *Violation {
	if m.kind == mStep {
		return nil
	}
	before, after := c.p.holders(o.before), c.p.holders(o.after)
	if v := c.judgeOneGrant(o.releaser, before, after); v != nil {
		return v
	}
	var fresh []grant
	for _, g := range after {
		if !slices.Contains(before, g) && !(m.kind == mStamp && g.owner == w.owner(int(m.who))) {
			fresh = append(fresh, g)
		}
	}
	for _, g := range fresh {
		if v := c.judgeGrant(w, m, n, g, fresh); v != nil {
			return v
		}
	}
	return nil
}

// judgeOneGrant: a lock holds one grant, and passes from one to another
// only by the first's release (the step's releaser); a semaphore holds at
// most its limit.
func (c *checker) judgeOneGrant(releaser string, before, after []grant) *Violation {
	if c.p.kind == Semaphore {
		if len(after) > c.p.limit {
			return &Violation{OneGrant, fmt.Sprintf("%d live permits of a semaphore of %d: %v", len(after), c.p.limit, after)}
		}
		return nil
	}
	if len(before) == 1 && len(after) == 1 && before[0] != after[0] && before[0].owner != releaser {
		return &Violation{OneGrant, fmt.Sprintf("%s took %s's live grant", after[0].owner, before[0].owner)}
	}
	return nil
}

// judgeGrant checks one grant g the step made (fresh are all it made): it
// went to a waiter still waiting (or to the acquire the mover's own move
// made), in the order the checker saw the waiters queue, with a token above
// every one before. A grant to a waiter that left with a grant a message
// handed it (even by that participant's own release) is let pass if its
// Locker remembers that (it passes the grant on: judgeLeftovers), and is
// held to no order. A participant between its grant and its stamp
// (Config.Source) is still in its acquire. Under Config.Source the Redis
// counter's tokens fence nothing, and are held to nothing: the stamps'
// are (judgeStamp).
func (c *checker) judgeGrant(w *world, m move, n *world, g grant, fresh []grant) *Violation {
	i, cycle := clientIndex(g.owner, len(w.clients))
	if i < 0 {
		return &Violation{OneGrant, "a grant to " + g.owner + ", whom no participant is"}
	}
	cl := &w.clients[i]
	own := i == int(m.who) && acquires[m.kind]
	left := cycle != n.clients[i].cycle || !own && (cl.phase == dead || !cl.waiting() && !cl.stamps())
	if _, remembered := cl.tookAs(cycle); left && (cl.phase == dead || !remembered) {
		return &Violation{Entries, fmt.Sprintf("%s handed to %s, whose wait had ended (%s, acquire %d)",
			c.p.kind, g.owner, phaseNames[cl.phase], cl.cycle)}
	}
	if !left {
		if v := c.judgeOrder(w, m, n, i, fresh, g); v != nil {
			return v
		}
		n.clients[i].queued = false
	}
	if !c.p.fenced() || c.cfg.Source {
		return nil
	}
	if !above(g.token, w.top) && !c.unfloored(w) {
		return &Violation{Tokens, fmt.Sprintf("token %s granted to %s after token %s", g.token, g.owner, w.top)}
	}
	n.top = g.token
	return nil
}

// unfloored says w's path lost the fence counter (a restart) and stepped
// the server's clock back: the clock floor then draws tokens below those
// granted before, as documented (a clock that goes back further than the
// outage lasted), so tokens and terms are not held to increase; unless
// they come from a token source (Config.Source), which no fault of the
// server's touches: then nothing is exempt.
func (c *checker) unfloored(w *world) bool {
	return !c.cfg.Source && w.back && w.left.Restart < c.cfg.Faults.Restart
}

// judgeStamp: under Config.Source, a token a participant holds once its
// stamp's reply said held is above every token held before it, whatever
// the server lost or its clock did: no path is exempt.
func (c *checker) judgeStamp(w *world, m move, n *world, o *outcome) *Violation {
	s := o.stamp
	if s == nil {
		return nil
	}
	if !above(s.token, w.top) {
		return &Violation{Tokens, fmt.Sprintf("%s holds token %s, stamped after token %s was held", who(m), s.token, w.top)}
	}
	n.top, n.topGrant = s.token, s.grant
	return nil
}

// acquires are the moves by which a participant's own command may grant it
// the resource.
var acquires = map[moveKind]bool{mProbe: true, mTry: true, mSettle: true, mAttempt: true}

// judgeOrder: a grant g to participant i (fresh are all the step made)
// leaves no live waiter queued before it unserved (but the mover, if its
// move ended its wait, or its turn: a waiter that gives up serves those
// behind it, and so does one that releases a grant whose reply came late).
// A waiter keeps its place for its whole wait: one handed a grant it could
// not use (its message came late) queues again there.
func (c *checker) judgeOrder(w *world, m move, n *world, i int, fresh []grant, g grant) *Violation {
	mine := 0
	if cl := &w.clients[i]; cl.waiting() || cl.stamps() {
		mine = cl.seq
	}
	for k := range w.clients {
		ck := &w.clients[k]
		nk := &n.clients[k]
		left := k == int(m.who) && (!nk.waiting() || !nk.queued || nk.leaving())
		if k == i || left || !c.candidate(w, ck) || mine != 0 && ck.seq > mine || served(w, k, fresh) {
			continue
		}
		return &Violation{FIFO, fmt.Sprintf("%s granted to %s while %s, queued before it, waits", c.p.kind, g.owner, w.owner(k))}
	}
	return nil
}

// candidate says whether cl, a participant in w, is a live waiter queued,
// as the checker sees it: one whose deadline has passed by its own clock
// has given up, even before it acts on it, and one whose give-up went to
// the server has, even before it reads the reply.
func (c *checker) candidate(w *world, cl *client) bool {
	return cl.phase != dead && cl.waiting() && cl.queued && cl.seq != 0 && !cl.timedOut(w.local()) && !cl.leaving()
}

// served says whether participant k got one of the grants fresh.
func served(w *world, k int, fresh []grant) bool {
	for _, g := range fresh {
		if g.owner == w.owner(k) {
			return true
		}
	}
	return false
}

// above says whether token a is above b (both decimal; b may be "").
func above(a, b string) bool {
	x, err := strconv.ParseUint(a, 10, 64)
	if b == "" {
		return err == nil
	}
	y, _ := strconv.ParseUint(b, 10, 64)
	return err == nil && x > y
}

// judgeElection: a term that takes office is above every one before; a read
// reports the leader the keys hold.
func (c *checker) judgeElection(n *world, o *outcome) *Violation {
	if o.office != "" {
		term := c.p.parseValue(o.office).token
		if n.term != "" && !above(term, n.term) && !c.unfloored(n) {
			return &Violation{Tokens, fmt.Sprintf("term %s took office after term %s", term, n.term)}
		}
		n.term = term
	}
	if r := o.read; r != nil && r.got != r.want {
		return &Violation{LeaderRead, fmt.Sprintf("a read reported leader %q while the keys held %q", r.got, r.want)}
	}
	return nil
}

// judgeWaitingTime: the resource does not stay free for more than a recheck
// interval while a live waiter that can act is queued (by the waiters'
// clock: they sleep on their own timers). One that waits to send a command
// again after its reply was lost cannot act, as a paused one cannot: up to
// a read timeout passes first.
func (c *checker) judgeWaitingTime(n *world) *Violation {
	waiting := false
	for i := range n.clients {
		cl := &n.clients[i]
		waiting = waiting || c.candidate(n, cl) && !cl.paused && cl.pending == nil
	}
	switch {
	case !waiting || !c.p.free(n.rs):
		n.freeSince = -1
	case n.freeSince < 0:
		n.freeSince = n.local()
	case n.local()-n.freeSince > recheck:
		return &Violation{FIFO, fmt.Sprintf("%s free for %d ms with a live waiter queued", c.p.kind, n.local()-n.freeSince)}
	}
	return nil
}

// judgeQueueLife: a queue with no live waiter queued is gone within its
// holder's ttl and the queue's slack, by the server's clock (a key expires
// at a time on it: a step of the clock moves its expiry with it).
func (c *checker) judgeQueueLife(n *world) *Violation {
	live := false
	for i := range n.clients {
		live = live || c.candidate(n, &n.clients[i])
	}
	switch {
	case live || n.rs.key(c.p.queue()) == nil:
		n.lonely = -1
	case n.lonely < 0:
		n.lonely = n.rs.clock
	case n.rs.clock-n.lonely > ttl+linger:
		return &Violation{Entries, fmt.Sprintf("a queue without live waiters outlived them by %d ms", n.rs.clock-n.lonely)}
	}
	return nil
}

// judgeLeftovers: a grant handed to a waiter that had left (a forged
// message handed it another) costs the lock a round trip, not a ttl: its
// Locker passes it on before time passes, unless that participant is
// paused or dead (as its own grant would wait out its ttl then).
func (c *checker) judgeLeftovers(w *world, m move, o *outcome) *Violation {
	if m.kind != mAdvance {
		return nil
	}
	for _, g := range c.p.holders(o.before) {
		i, cycle := clientIndex(g.owner, len(w.clients))
		if i < 0 {
			continue
		}
		cl := &w.clients[i]
		mine := cycle == cl.cycle && (cl.waiting() || cl.stamps() || cl.pending != nil || cl.phase == holding && c.p.heldAs(o.before, cl.value))
		if cl.phase == dead || cl.paused || mine {
			continue
		}
		why := ""
		if w.back {
			why = " (the server's clock stepped back: a lease that had lapsed may be live again)"
		}
		return &Violation{Entries, fmt.Sprintf("the grant handed to %s, whose wait had ended, outlived a round trip: time passed with %s %s%s",
			g.owner, w.owner(i), phaseNames[cl.phase], why)}
	}
	return nil
}

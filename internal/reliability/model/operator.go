package model

import "strconv"

// The operator breaks the lock (Core.Break, as lockrun's and an admin's
// Break call it), at any time, while Faults.Break lasts: one Break at a
// time, with its resend when its reply is lost (Faults.Resend), and its
// serving the queue on when its call stopped short at dead entries. The
// client-side steps are protocol.breakLock's; this file only moves them.

// operator is the one who breaks the lock: the Break under way, if any.
type operator struct {
	// target is the live grant the Break found when it was first sent
	// (zero for none), kept until the Break is over: the one it may end.
	target grant
	// serveUntil, when not 0, says the Break's call stopped short at dead
	// queue entries, and it goes on serving the queue (as a release does)
	// until the operator's clock reaches it (ms).
	serveUntil int64
	pending    *resend // its command whose reply was lost, if any
}

// busy says whether a Break is under way.
func (p *operator) busy() bool { return p.pending != nil || p.serveUntil != 0 }

// operatorMoves appends the operator's moves in w to ms: a Break, or the
// next step of the one under way; and says whether one is due before time
// passes.
func (c *checker) operatorMoves(w *world, ms []move) ([]move, bool) {
	add := func(k moveKind) { ms = append(ms, move{kind: k, who: operatorWho, arg: -1}) }
	switch p := &w.op; {
	case p.pending != nil:
		add(mResend)
		return ms, w.local() >= p.pending.at+readTimeout
	case p.serveUntil != 0:
		add(mServeOn)
		return ms, true
	case w.left.Break > 0:
		add(mBreak)
	}
	return ms, false
}

// beginBreak sets a Break under way in n: it spends one of the budget, and
// notes the live grant it is sent against.
func (c *checker) beginBreak(n *world) {
	n.left.Break--
	n.op.target = grant{}
	if hs := c.p.holders(n.rs); len(hs) == 1 {
		n.op.target = hs[0]
	}
}

// operatorMove runs the operator's move of o: its Break (first sent, or
// sent again after its reply was lost), or its serving the queue on.
func (c *checker) operatorMove(x *executor, n *world, o *outcome) {
	if o.move.kind == mServeOn {
		if !c.servedOn(x, n, o, n.op.serveUntil) {
			n.op = operator{}
		}
		return
	}
	o.broke = true
	// One nonce a Break, the same for its resend: the Breaks of a path
	// are told apart by how many were left when each began.
	b, err := c.p.breakLock(conn{c, x, n, o}, strconv.Itoa(int(n.left.Break)))
	if err != nil {
		o.fail(err)
		return
	}
	o.broken = &b.broken
	if b.handed != "" && !o.replayed {
		o.handed = append(o.handed, b.handed)
	}
	if b.more {
		n.op.serveUntil, o.short = o.now+serveOnFor, true
		return
	}
	n.op = operator{}
}

// conn is how the client-side steps of protocol.go send commands, for the
// move that does o (see send and query).
type conn struct {
	c *checker
	x *executor
	n *world
	o *outcome
}

func (k conn) send(op string, cmd []string) any  { return k.c.send(k.x, k.n, k.o, op, cmd) }
func (k conn) query(op string, cmd []string) any { return k.c.query(k.x, k.n, k.o, op, cmd) }

package model

import (
	"slices"
)

// outcome is what one move did: the server operation it ran, the server
// before and after, the reply, and what the checker must judge.
type outcome struct {
	op            string // the scripts or commands run, "" for none
	ran           bool   // the move ran an operation on the server
	before, after redisState
	reply         any
	err           error // a reply the participant could not read
	// look is a holder's look at its grant (refresh, release): the value
	// it believes it holds, and whether the reply said it does.
	look *look
	// self is the value the mover was told it was granted by its own
	// command, "" for none.
	self string
	// office is the grant that took office in an election; read, what a
	// read of the election reported.
	office string
	read   *leaderRead
}

// leaderRead is the leader a read reported (its term, "" for none), and the
// one the keys held as it ran.
type leaderRead struct{ got, want string }

type look struct {
	value string
	held  bool
}

// apply returns the world after move m in w, and what it did. x runs the
// server operations.
func (c *checker) apply(x *executor, w *world, m move) (*world, outcome) {
	n := w.clone()
	o := outcome{before: w.rs, after: w.rs}
	i := int(m.who)
	switch m.kind {
	case mProbe:
		c.probe(x, n, i, &o)
	case mAttempt:
		c.attempt(x, n, i, &o)
	case mReceive:
		c.receive(x, n, i, int(m.arg), &o)
	case mGiveUp:
		n.left.GiveUp--
		c.run(x, n, &o, "release.lua (give up)", c.p.release(n.owner(i), &n.clients[i].e))
		n.clients[i] = c.ended(n.clients[i])
	case mRelease, mRefresh, mAnnounce, mRead:
		c.holderMove(x, n, i, m.kind, &o)
	default:
		c.otherMove(x, n, m, &o)
	}
	c.purge(n)
	n.rs = x.settle(n.rs, c.p.now(n))
	return n, o
}

// otherMove applies the moves that change no participant's acquire.
func (c *checker) otherMove(x *executor, n *world, m move, o *outcome) {
	i, j := int(m.who), int(m.arg)
	switch m.kind {
	case mPause:
		n.left.Pause--
		n.clients[i].paused = true
	case mResume:
		n.clients[i].paused = false
	case mDie:
		// Only its owner ids are left of it: what the server may still
		// hold of it names them.
		n.left.Die--
		if n.clients[i].subscribed {
			c.exec(x, n, o, "", subscribeOp(channel(name(i)), false))
		}
		n.clients[i] = client{phase: dead, cycle: n.clients[i].cycle}
	case mAdvance:
		c.exec(x, n, o, "", advanceOp(c.nextDeadline(n)))
	case mLose:
		n.left.Lose--
		n.flight = slices.Delete(n.flight, j, j+1)
	case mDuplicate:
		n.left.Dup--
		n.flight = slices.Insert(n.flight, j+1, n.flight[j])
	case mForge:
		n.left.Forge--
		text := c.p.forged(n.owner(j), n.clients[j].e.gen, n.rs.micros)
		c.exec(x, n, o, "PUBLISH (forged)", publishOp(channel(name(j)), text))
	case mRestart:
		n.left.Restart--
		c.exec(x, n, o, "", restartOp(restartGap))
		n.flight = nil
	}
}

// restartGap is how long a restart takes, ms: the clock floor keeps tokens
// increasing across it because the clock moves on meanwhile.
const restartGap = 1

// run runs cmd on the server for a move of n, as op.
func (c *checker) run(x *executor, n *world, o *outcome, op string, cmd []string) {
	c.exec(x, n, o, op, commandOp(cmd))
}

// exec runs op on the server for a move of n, and takes the messages it
// published into flight. The outcome's before is the server before the
// move's first operation, its after the server after its last.
func (c *checker) exec(x *executor, n *world, o *outcome, label string, op op) {
	st := n.rs
	st.micros = c.p.now(n)
	r := x.run(st, op)
	if !o.ran {
		o.before, o.ran = r.before, true
	}
	switch {
	case label == "":
	case o.op == "":
		o.op, o.reply = label, r.reply
	default:
		o.op += ", then " + label
	}
	n.rs, o.after = r.after, r.after
	c.deliver(n, r.pubs)
}

// deliver puts the messages published on a participant's grant channel in
// flight to it, if it is alive and subscribed: others are lost.
func (c *checker) deliver(n *world, pubs []published) {
	var in []msg
	for _, p := range pubs {
		for i := range n.clients {
			cl := &n.clients[i]
			if p.channel == channel(name(i)) && cl.subscribed && cl.phase != dead {
				in = append(in, msg{to: i, text: p.msg})
			}
		}
	}
	slices.SortStableFunc(in, func(a, b msg) int { return a.to - b.to })
	n.flight = append(n.flight, in...)
}

// purge drops the messages no waiter will read: its Locker routes a message
// by the ticket's id to the waiter with that id, and drops one for a waiter
// that has left (notify.Waiter, strays.heard).
func (c *checker) purge(n *world) {
	n.flight = slices.DeleteFunc(n.flight, func(m msg) bool {
		cl := &n.clients[m.to]
		return !cl.waiting() || ticketID(m.text) != n.owner(m.to)
	})
}

// probe begins an acquire with one try; when the resource is busy, the
// participant subscribes to its grant channel (once) and is about to
// attempt.
func (c *checker) probe(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	cl.cycle++
	owner := n.owner(i)
	c.run(x, n, o, c.p.probeName(), c.p.probe(owner))
	a, err := c.p.readProbe(o.reply, owner)
	if c.took(n, i, a, err, o) {
		return
	}
	if !cl.subscribed {
		cl.subscribed = true
		c.exec(x, n, o, "", subscribeOp(channel(name(i)), true))
	}
	cl.phase, cl.e = ready, entry{}
}

// attempt is a waiter's attempt (waiter.attempt): it is granted the
// resource, or its entry is queued (again), and it sleeps until a grant
// message or its timer.
func (c *checker) attempt(x *executor, n *world, i int, o *outcome) {
	owner := n.owner(i)
	c.run(x, n, o, c.p.waitName(), c.p.wait(owner, n.clients[i].e))
	a, err := c.p.readWait(o.reply, owner)
	if c.took(n, i, a, err, o) {
		return
	}
	cl := &n.clients[i]
	if a.place != "" {
		if a.queued && cl.e.place != "" {
			cl.e.gen++
		}
		cl.e.place, cl.e.server = a.place, a.server
	}
	if a.queued || a.kept {
		cl.queued = true
		if cl.seq == 0 {
			cl.seq = n.nextSeq()
		}
	}
	d := int64(recheck)
	if a.holderTTL >= 0 {
		d = min(a.holderTTL, recheck)
	}
	cl.phase, cl.timer = sleeping, n.rs.clock+max(d, 1)
}

// receive is a sleeping waiter reading message j (waiter.sleep, handed):
// only a grant to its current entry made after its latest attempt is its
// grant; a grant read after its lease's deadline is released at once by its
// value. Either way short of a grant, it attempts next.
func (c *checker) receive(x *executor, n *world, i, j int, o *outcome) {
	text := n.flight[j].text
	n.flight = slices.Delete(n.flight, j, j+1)
	cl := &n.clients[i]
	cl.phase = ready
	g, ok := parseGrant(text)
	if !ok || !g.accepts(cl.e) {
		return
	}
	value := g.value(n.owner(i))
	if n.rs.clock >= g.at/1000+ttl-drift {
		c.run(x, n, o, "release.lua (late grant)", c.p.release(value, nil))
		return
	}
	n.clients[i] = c.granted(*cl, value, n.rs.clock)
}

// took reads what participant i's acquire found (a, or the error err), and
// reports whether it was granted: then the participant holds it.
func (c *checker) took(n *world, i int, a attempt, err error, o *outcome) bool {
	o.err = err
	if err != nil || !a.granted {
		return false
	}
	o.self = a.value
	n.clients[i] = c.granted(n.clients[i], a.value, n.rs.clock)
	return true
}

// granted is cl, holding value from now (ms) on.
func (c *checker) granted(cl client, value string, now int64) client {
	return client{phase: holding, paused: cl.paused, subscribed: cl.subscribed, cycle: cl.cycle, value: value, renew: now + ttl/3}
}

// ended is cl after its acquire ended without a grant, or its grant ended.
func (c *checker) ended(cl client) client {
	return client{phase: idle, paused: cl.paused, subscribed: cl.subscribed, cycle: cl.cycle}
}

// holderMove applies a holder's release or refresh, a candidate's taking
// office, or a read of the election's leader.
func (c *checker) holderMove(x *executor, n *world, i int, k moveKind, o *outcome) {
	switch k {
	case mRelease:
		c.release(x, n, i, o)
	case mRefresh:
		c.refresh(x, n, i, o)
	case mAnnounce:
		c.announce(x, n, i, o)
	case mRead:
		c.run(x, n, o, "election_leader.lua", c.p.readLeader())
		got, err := c.p.parseLeader(o.reply)
		o.err, o.read = err, &leaderRead{got: got, want: c.p.leader(o.before)}
	}
}

// release is a holder's release, a look at its grant; a leader resigns
// after it (election.lead).
func (c *checker) release(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	c.run(x, n, o, c.p.releaseName(), c.p.release(cl.value, nil))
	held, err := c.p.readRelease(o.reply)
	o.look, o.err = &look{cl.value, held}, err
	if c.cfg.Kind == Election {
		c.run(x, n, o, "election_resign.lua", c.p.resign(cl.value))
	}
	n.clients[i] = c.ended(*cl)
}

// refresh is a holder's refresh, a look at its grant: a holder told it
// holds it no more stops holding.
func (c *checker) refresh(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	c.run(x, n, o, c.p.refreshName(), c.p.refresh(cl.value))
	held, err := c.p.readRefresh(o.reply)
	o.look, o.err = &look{cl.value, held}, err
	if !held {
		n.clients[i] = c.ended(*cl)
		return
	}
	cl.renew = n.rs.clock + ttl/3
}

// announce is a candidate holding the election's lock taking office; one
// that cannot (its lease ended) releases its grant and fails
// (election.announce).
func (c *checker) announce(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	c.run(x, n, o, "election_announce.lua", c.p.announce(cl.value))
	took, err := c.p.readAnnounce(o.reply)
	o.err = err
	if took {
		cl.office, o.office = true, cl.value
		return
	}
	c.run(x, n, o, c.p.releaseName(), c.p.release(cl.value, nil))
	n.clients[i] = c.ended(*cl)
}

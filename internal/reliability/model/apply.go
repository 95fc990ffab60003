package model

import (
	"fmt"
	"slices"
	"strconv"
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
	// command, "" for none; handed, the tokens its calls said they handed
	// the lock on with to the first live waiter ("-" for an efficiency
	// grant).
	self   string
	handed []string
	// short says a call stopped short at dead queue entries; passed, that
	// a Locker released a grant handed to a waiter of its that had left;
	// unqueued, that a release took out the entry of a handed lease it
	// found lost.
	short, passed, unqueued bool
	// office is the grant that took office in an election; read, what a
	// read of the election reported.
	office string
	read   *leaderRead
	// at is when the move's commands were sent, and now when their last
	// reply was read, on the mover's clock (ms): the same instant, but for
	// a command sent again after its reply was lost.
	at, now int64
	// move is the move whose steps ran: the move, or the one a resend
	// resumes; releaser, the owner id whose grant it may end (releaser).
	move     move
	releaser string
	// The operator's: broke says its Break's command ran, broken what its
	// reply said (nil: not read), target the live grant the Break found
	// when first sent.
	broke  bool
	broken *bool
	target grant
	// What a lost reply needs (resend.go): the move's state-changing calls
	// so far (sends), the one whose reply is lost (lose, 0 for none) and
	// its command, name and reply, the replies read so far, and in a resend
	// the replay of the move it resumes; replayed says the latest reply
	// came from there.
	sends, lose int
	lost        []string
	lostOp      string
	lostReply   any
	replies     []any
	replay      *resend
	replayed    bool
	// Config.Source (stamp.go): stamp is what a stamp that held stored;
	// lateStamp says a stamp found its lease gone, restamped that a stamp
	// sent again found its own, floorless that the stamped grant's Redis
	// token was not above the one stamped before it, and noToken that a
	// draw came too late.
	stamp                                    *stamped
	lateStamp, restamped, floorless, noToken bool
	// Config.Plain (plain.go): missed says a plain command missed, and
	// resentDelete that a release reported released after its DELEX was
	// sent again, though the script found the lease gone or another
	// owner's.
	missed, resentDelete bool
}

// leaderRead is the leader a read reported (its term, "" for none), and the
// one the keys held as it ran.
type leaderRead struct{ got, want string }

// look is a holder's look at its grant stored as value: whether the reply
// said it holds it, and whether the look was a release (else a refresh);
// for a stamp (Config.Source), the grant it stores, which it counts the
// caller's too; for a release whose plain DELEX was sent again
// (Config.Plain), what that DELEX's first send found.
type look struct {
	value, stamped string
	held           bool
	release        bool
	resent         *resentDelete
}

// apply returns the world after move m in w, and what it did. x runs the
// server operations. A move with a lost reply (m.lose) is cut there, and
// a resend resumes the move it cut (resend.go).
func (c *checker) apply(x *executor, w *world, m move) (*world, outcome) {
	n := w.clone()
	o := outcome{before: w.rs, after: w.rs, at: w.local(), now: w.local(), move: m, lose: int(m.lose)}
	var text string
	if m.kind == mResend {
		text = c.resume(n, &o)
	} else {
		text = c.begin(n, m)
	}
	o.releaser, o.target = c.releaser(w, o.move, text), n.op.target
	if m.who == operatorWho {
		o.releaser = o.target.owner
	}
	if o.lose > 0 {
		n.left.Resend--
		c.cut(x, n, &o, text)
	} else {
		c.do(x, n, &o, text)
	}
	c.purge(n)
	n.rs = x.settle(n.rs, c.p.now(n))
	return n, o
}

// begin does what move m does once, however often its commands are sent:
// it spends a give-up's or a Break's budget (and sets the Break under
// way), and takes the message the move reads out of flight; it returns
// that message's text.
func (c *checker) begin(n *world, m move) string {
	switch j := int(m.arg); m.kind {
	case mBreak:
		c.beginBreak(n)
	case mGiveUp:
		n.left.GiveUp--
	case mReceive, mHear:
		text := n.flight[j].text
		n.flight = slices.Delete(n.flight, j, j+1)
		return text
	}
	return ""
}

// do runs the steps of the move of o, which read the message text.
func (c *checker) do(x *executor, n *world, o *outcome, text string) {
	m := o.move
	i := int(m.who)
	if m.who == operatorWho {
		c.operatorMove(x, n, o)
		return
	}
	switch m.kind {
	case mProbe:
		c.probe(x, n, i, o)
	case mTry, mSettle:
		c.try(x, n, i, m.kind == mSettle, o)
	case mAttempt:
		c.attempt(x, n, i, o)
	case mReceive:
		c.receive(x, n, i, text, o)
	case mHear:
		c.hear(x, n, i, text, o)
	case mGiveUp, mTimeout:
		c.releaseOp(x, n, i, o, "release.lua (give up)", c.p.release(n.owner(i), &n.clients[i].e))
		n.clients[i] = c.ended(n.clients[i])
	case mRelease, mServeOn, mRefresh, mAnnounce, mRead:
		c.holderMove(x, n, i, m.kind, o)
	case mDraw:
		c.draw(x, n, i, o)
	case mStamp:
		c.stamp(x, n, i, o)
	default:
		c.otherMove(x, n, m, o)
	}
}

// releaser is the owner id whose grant m, which read the message text,
// may release: a holder's release, a waiter's give-up, a late grant's
// release (a message's, or an acquire's reply's that came late after a
// resend: the acquire's owner id is w's then), a candidate's that could not
// take office, a Locker's release of a grant handed to a waiter that had
// left, a draw's that came too late; and a stamp, which replaces the
// owner's grant with its own.
func (c *checker) releaser(w *world, m move, text string) string {
	switch m.kind {
	case mRelease, mGiveUp, mTimeout, mReceive, mAnnounce, mProbe, mTry, mSettle, mAttempt, mDraw, mStamp:
		return w.owner(int(m.who))
	case mHear:
		return ticketID(text)
	}
	return ""
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
	case mStep:
		n.left.Step--
		d := c.steps[j]
		c.exec(x, n, o, fmt.Sprintf("the server's clock steps %+d ms", d), stepOp(d))
		n.skew, n.back = n.skew+d, n.back || d < 0
	}
}

// restartGap is how long a restart takes, ms: the clock floor keeps tokens
// increasing across it because the clock moves on meanwhile.
const restartGap = 1

// exec runs op on the server for a move of n, takes the messages it
// published into flight, and returns its reply. The outcome's before is the
// server before the move's first operation, its after the server after its
// last; its reply is the first labelled operation's.
func (c *checker) exec(x *executor, n *world, o *outcome, label string, op op) any {
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
		o.op += ", then " + label + " -> " + show(r.reply)
	}
	n.rs, o.after = r.after, r.after
	c.deliver(n, r.pubs)
	return r.reply
}

// paths are the rarer paths of the protocol that the move that did o took
// (Result.Paths).
func (c *checker) paths(o *outcome) []string {
	m := o.move
	var ps []string
	add := func(p string, took bool) {
		if took {
			ps = append(ps, p)
		}
	}
	add(PathStopShort, o.short)
	add(PathServeOn, m.kind == mServeOn && o.ran)
	add(PathSettle, m.kind == mSettle)
	add(PathServedHead, len(o.handed) > 0 && acquires[m.kind])
	add(PathPassedOn, o.passed)
	add(PathUnqueued, o.unqueued)
	add(PathLateStamp, o.lateStamp)
	add(PathRestamped, o.restamped)
	add(PathNoToken, o.noToken)
	add(PathFloorless, o.floorless)
	add(PathPlainMissed, o.missed)
	add(PathResentDelete, o.resentDelete)
	return ps
}

// fail notes in o that a reply could not be read, unless one could not
// before.
func (o *outcome) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// handedOn notes in o the grant a call's reply says it handed on, unless
// the reply came from a replay (resume): it was read before a later reply
// was lost, and what it claims may be over.
func (c *checker) handedOn(o *outcome, reply any, released bool) {
	if t := c.p.handedOn(reply, released); t != "" && !o.replayed {
		o.handed = append(o.handed, t)
	}
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

// purge drops the messages nobody will read: a Locker routes a message by
// the ticket's id to the waiter with that id, or to its strays when it
// remembers what that waiter took, and drops any other (notify.Waiter,
// strays.heard). Then each Locker forgets what its waiters took that no
// message can name any more (forget).
func (c *checker) purge(n *world) {
	n.flight = slices.DeleteFunc(n.flight, func(m msg) bool { return n.route(m) == dropped })
	for i := range n.clients {
		c.forget(n, i)
	}
}

// forget drops what participant i's Locker remembers of acquires that no
// message can name any more: no entry of theirs is queued (and none will
// be: its waiter has left), and no message names them in flight. The Go
// client keeps them longer (strays.tookFor), to no effect.
func (c *checker) forget(n *world, i int) {
	cl := &n.clients[i]
	named := func(t took) bool {
		id := name(i) + strconv.Itoa(t.cycle)
		for _, m := range n.flight {
			if m.to == i && ticketID(m.text) == id {
				return true
			}
		}
		q := n.rs.key(c.p.queue())
		for k := 0; q != nil && k < len(q.items); k += 2 {
			if entryID(q.items[k]) == id {
				return true
			}
		}
		return false
	}
	if slices.ContainsFunc(cl.took, func(t took) bool { return !named(t) }) {
		cl.took = slices.DeleteFunc(slices.Clone(cl.took), func(t took) bool { return !named(t) })
		if len(cl.took) == 0 {
			cl.took = nil
		}
	}
}

// probe begins an acquire that waits with one try; when the resource is
// busy, the participant subscribes to its grant channel (once) and is about
// to attempt. A probe leaves settling a resource whose queue goes first to
// the wait.
func (c *checker) probe(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	cl.cycle++
	if c.cfg.Patience > 0 {
		cl.giveUpAt = o.at + c.cfg.Patience
	}
	if c.cfg.drawEarly {
		cl.token = c.drawToken(n, "")
	}
	owner := n.owner(i)
	a, err := c.p.readTry(c.send(x, n, o, c.p.probeName(), c.p.probe(owner)), owner)
	o.short = c.p.kind == Semaphore && a.settle
	if granted, _ := c.got(x, n, i, a, err, o); granted {
		return
	}
	// Not granted, or granted late and released: it waits.
	if !cl.subscribed {
		cl.subscribed = true
		c.exec(x, n, o, "", subscribeOp(channel(name(i)), true))
	}
	cl.phase, cl.e = ready, entry{}
}

// try begins a lone try (acquire.once), or with settle makes its next call
// to settle a resource whose queue goes first (acquire.settle): it is
// granted the resource, or settles it next, or its try is over. A lone
// efficiency try that SET NX did not grant reads the holder.
func (c *checker) try(x *executor, n *world, i int, settle bool, o *outcome) {
	var a attempt
	var err error
	if settle {
		owner := n.owner(i)
		reply := c.send(x, n, o, c.p.settleName(), c.p.settle(owner))
		c.handedOn(o, reply, false)
		a, err = c.p.readWait(reply, owner)
		o.short = a.settle
	} else {
		n.clients[i].cycle++
		if c.cfg.drawEarly {
			n.clients[i].token = c.drawToken(n, "")
		}
		owner := n.owner(i)
		a, err = c.p.readTry(c.send(x, n, o, c.p.probeName(), c.p.try(owner)), owner)
		o.short = c.p.kind == Semaphore && a.settle // code 4; a lock's is a lapsed lease
		if err == nil && !a.granted && c.p.kind == Efficiency {
			cmds := c.p.holderRead()
			get, pttl := c.query(x, n, o, "GET", cmds[0]), c.query(x, n, o, "PTTL", cmds[1])
			a, err = c.p.readHolder(get, pttl, owner)
		}
	}
	switch granted, _ := c.got(x, n, i, a, err, o); {
	case granted:
	case err == nil && a.settle:
		n.clients[i].phase = settling
	default:
		n.clients[i] = c.ended(n.clients[i])
	}
}

// attempt is a waiter's attempt (waiter.attempt): it is granted the
// resource, or its entry is queued (again), and it sleeps until a grant
// message or its timer; or, when the call stopped short at dead entries, it
// attempts again at once.
func (c *checker) attempt(x *executor, n *world, i int, o *outcome) {
	owner := n.owner(i)
	fresh := n.clients[i].e.place == ""
	reply := c.send(x, n, o, c.p.waitName(), c.p.wait(owner, n.clients[i].e))
	c.handedOn(o, reply, false)
	a, err := c.p.readWait(reply, owner)
	granted, late := c.got(x, n, i, a, err, o)
	cl := &n.clients[i]
	switch {
	case granted:
		return
	case late:
		cl.phase = ready // released already: it attempts again at once
		return
	}
	if a.place != "" {
		if a.queued && cl.e.place != "" {
			cl.e.gen++
		}
		cl.e.place, cl.e.server, cl.e.sent = a.place, a.server, o.at
	}
	c.seen(n, i, a, fresh)
	if a.settle {
		cl.phase, o.short = ready, true
		return
	}
	d := int64(recheck)
	if a.holderTTL >= 0 {
		d = min(a.holderTTL, recheck)
	}
	cl.phase, cl.timer = sleeping, o.now+max(d, 1)
}

// seen notes what the checker sees of participant i's attempt, which found
// a: whether it queued its entry (or found it queued), and if it is the
// first of its wait to, its place in the order the waiters queue. An
// attempt that stopped short queued its entry first, if it had a place.
// One sent without a place (fresh) by a waiter the checker saw queued no
// more queues anew, behind those queued meanwhile: a waiter that never
// read its place (its reply was lost, and then its grant came late) does
// not keep it.
func (c *checker) seen(n *world, i int, a attempt, fresh bool) {
	if a.queued || a.kept || a.settle && a.place != "" {
		cl := &n.clients[i]
		if fresh && !cl.queued {
			cl.seq = 0
		}
		cl.queued = true
		if cl.seq == 0 {
			cl.seq = n.nextSeq()
		}
	}
}

// receive is a sleeping waiter reading message j, the oldest for it in
// flight (waiter.sleep, handed): messages arrive in the order they were
// published, its Locker keeps every one for it, oldest first, and the
// waiter takes one at a time (notify.Waiter.Grant). Only a grant to its
// current entry made after its latest attempt is its grant; a grant read
// after its lease's deadline is released at once by its value. Either way
// short of a grant, it attempts next, and reads the next message, if that
// attempt leaves it waiting. A grant it takes, its Locker remembers
// (strays.took) before the waiter leaves its channel: the messages for it
// still in flight then go to its strays (hear), which release any grant
// but the one it took. (The participants share one limit: no permit comes
// under another.)
func (c *checker) receive(x *executor, n *world, i int, text string, o *outcome) {
	cl := &n.clients[i]
	cl.phase = ready
	g, ok := parseGrant(text)
	if !ok || !g.accepts(cl.e) {
		return
	}
	value := g.value(n.owner(i))
	switch start := g.start(cl.e, o.at); {
	case o.at >= start+ttl-drift:
		c.releaseOp(x, n, i, o, c.p.releaseName()+" (late grant)", c.p.releaseUnmarked(value))
	case c.cfg.Source:
		n.clients[i] = c.toDraw(*cl, value, start, mReceive)
	default:
		kept := append(slices.Clone(cl.took), took{cycle: cl.cycle, value: value})
		if c.cfg.forgetful {
			kept = cl.took
		}
		gen := cl.e.gen
		n.clients[i] = c.granted(*cl, value, start)
		n.clients[i].took = kept
		n.clients[i].handed, n.clients[i].e = true, entry{gen: gen}
	}
}

// hear is participant i's Locker reading message j, a grant for a waiter of
// its that left with a grant a message handed it (strays.heard): a grant
// other than the one it took, or any once that lease is over, it releases
// at once by its value.
func (c *checker) hear(x *executor, n *world, i int, text string, o *outcome) {
	cl := &n.clients[i]
	g, ok := parseGrant(text)
	_, cycle := clientIndex(g.id, len(n.clients))
	t, known := cl.tookAs(cycle)
	if !ok || !known || c.cfg.deaf {
		return
	}
	if v, pass := g.passOn(g.id, t, cl.over(t, o.at)); pass {
		o.passed = c.releaseOp(x, n, i, o, c.p.releaseName()+" (heard)", c.p.releaseUnmarked(v))
	}
}

// got reads what participant i's acquire found (a, or the error err), and
// reports whether it was granted: then the participant holds it. A grant
// whose reply came after its lease's deadline, measured from the send
// (a command sent again after its reply was lost), is late: it is released
// at once (acquire.lease), and the acquire goes on as if not granted.
func (c *checker) got(x *executor, n *world, i int, a attempt, err error, o *outcome) (granted, late bool) {
	switch {
	case err != nil:
		o.fail(err)
		return false, false
	case !a.granted:
		return false, false
	case o.now >= o.at+ttl-drift:
		c.releaseOp(x, n, i, o, c.p.releaseName()+" (late grant)", c.p.releaseUnmarked(a.value))
		// Its turn came, and ended with the grant it could not use: to the
		// checker it is queued no more, as after a grant message read late.
		n.clients[i].queued = false
		return false, true
	}
	o.self = a.value
	if c.cfg.Source {
		n.clients[i] = c.toDraw(n.clients[i], a.value, o.at, o.move.kind)
		return true, false
	}
	n.clients[i] = c.granted(n.clients[i], a.value, o.at)
	return true, false
}

// granted is cl, holding value from start (ms) on.
func (c *checker) granted(cl client, value string, start int64) client {
	return client{phase: holding, paused: cl.paused, subscribed: cl.subscribed, cycle: cl.cycle, value: value,
		deadline: start + ttl - drift, serveUntil: cl.serveUntil, resign: cl.resign, took: cl.took}
}

// ended is cl after its acquire ended without a grant, or its grant ended.
func (c *checker) ended(cl client) client {
	return client{phase: idle, paused: cl.paused, subscribed: cl.subscribed, cycle: cl.cycle,
		serveUntil: cl.serveUntil, resign: cl.resign, took: cl.took}
}

// releaseOp runs a release of participant i's (cmd, named op) and reads its
// reply: whether it ended a grant the caller held. A release that stopped
// short at dead entries leaves the participant serving the queue on
// (Core.serveOn).
func (c *checker) releaseOp(x *executor, n *world, i int, o *outcome, op string, cmd []string) bool {
	held, _ := c.releaseRead(x, n, i, o, op, cmd)
	return held
}

// releaseRead is releaseOp, returning the reply too.
func (c *checker) releaseRead(x *executor, n *world, i int, o *outcome, op string, cmd []string) (bool, any) {
	reply := c.send(x, n, o, op, cmd)
	c.handedOn(o, reply, true)
	held, more, err := c.p.readRelease(reply)
	if err != nil {
		o.fail(err)
	}
	if more {
		n.clients[i].serveUntil = o.now + serveOnFor
		o.short = true
	}
	return held, reply
}

// holderMove applies a holder's release or refresh, a releaser's going on,
// a candidate's taking office, or a read of the election's leader.
func (c *checker) holderMove(x *executor, n *world, i int, k moveKind, o *outcome) {
	switch k {
	case mRelease:
		c.release(x, n, i, o)
	case mServeOn:
		c.serveOn(x, n, i, o)
	case mRefresh:
		c.refresh(x, n, i, o)
	case mAnnounce:
		c.announce(x, n, i, o)
	case mRead:
		got, err := c.p.parseLeader(c.query(x, n, o, "election_leader.lua", c.p.readLeader()))
		o.err, o.read = err, &leaderRead{got: got, want: c.p.leader(o.before)}
	}
}

// release is a holder's release, a look at its grant; a leader resigns
// after it (election.lead), once it has served the queue on.
func (c *checker) release(x *executor, n *world, i int, o *outcome) {
	if c.plainLease(&n.clients[i]) {
		c.plainRelease(x, n, i, o)
		return
	}
	value := n.clients[i].value
	o.look = &look{value: value, held: c.releaseHeld(x, n, i, o), release: true}
	if c.cfg.Kind == Election {
		c.resign(x, n, i, o, value)
	}
}

// releaseHeld is Held.release: participant i releases the grant it holds,
// and reports whether the reply said it held it. A lease a grant message
// handed it that the release finds lost may have come in a forged message,
// which left its entry queued: the entry is taken out (unqueue).
func (c *checker) releaseHeld(x *executor, n *world, i int, o *outcome) bool {
	cl := n.clients[i]
	held := c.releaseOp(x, n, i, o, c.p.releaseName(), c.p.release(cl.value, nil))
	n.clients[i] = c.ended(n.clients[i]) // with the serving on releaseOp began
	if !held && cl.handed {
		c.unqueue(x, n, i, cl.e.gen, o)
	}
	return held
}

// unqueue takes participant i's entry of generation gen out of the queue,
// after a release of the lease a grant message handed to it found that
// lease lost; or, while that release serves the queue on (Core.serveOn,
// which runs before Held.release reads the reply), notes that it will once
// done.
func (c *checker) unqueue(x *executor, n *world, i, gen int, o *outcome) {
	if cl := &n.clients[i]; cl.serveUntil != 0 {
		cl.handed, cl.e = true, entry{gen: gen}
		return
	}
	earlier := len(o.handed)
	if c.releaseOp(x, n, i, o, c.p.releaseName()+" (handed entry)", c.p.unqueue(n.owner(i), gen)) {
		// It ended a grant of the owner's: the one an earlier call of this
		// step handed on, if any, went to this entry, and is over.
		o.handed = o.handed[earlier:]
	}
	o.unqueued = true
}

// resign is a leader whose grant stored as value ended clearing its leader
// key (election.resign), or, while it serves the queue on, noting that it
// will.
func (c *checker) resign(x *executor, n *world, i int, o *outcome, value string) {
	if n.clients[i].serveUntil != 0 {
		n.clients[i].resign = value
		return
	}
	c.send(x, n, o, "election_resign.lua", c.p.resign(value))
}

// serveOn is a releaser's next call after a release that stopped short at
// dead entries (Core.serveOn): it goes on until a reply says it is done, or
// its time for it is up; then a release that found a handed lease lost
// takes its entry out (which may serve on again), and a leader resigns.
func (c *checker) serveOn(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	if c.servedOn(x, n, o, cl.serveUntil) {
		return
	}
	value, handed, gen := cl.resign, cl.handed, cl.e.gen
	cl.serveUntil, cl.resign, cl.handed, cl.e = 0, "", false, entry{}
	if handed {
		c.unqueue(x, n, i, gen, o)
	}
	if value != "" {
		c.resign(x, n, i, o, value)
	}
}

// servedOn is a releaser's next call after a release that stopped short
// at dead entries (Core.serveOn), while its time for it lasts (until, on
// its clock): it reports whether the reply asks for another.
func (c *checker) servedOn(x *executor, n *world, o *outcome, until int64) bool {
	if o.at >= until {
		return false
	}
	reply := c.send(x, n, o, c.p.releaseName()+" (serve on)", c.p.serveOn())
	c.handedOn(o, reply, true)
	more := c.p.readServeOn(reply)
	o.short = o.short || more
	return more
}

// refresh is a holder's refresh, a look at its grant: a holder told it
// holds it no more stops holding (a leader resigns). A leader's refresh
// keeps its leader key alive, and one that finds the key without its grant
// writes it back (lead's restore). Under Config.Plain an efficiency lease's
// refresh sends its plain command first (plainRefresh), and the script only
// in the holder's next move, after a miss: the lease is measured from the
// plain command's send.
func (c *checker) refresh(x *executor, n *world, i int, o *outcome) {
	at, op, done := c.plainRefresh(x, n, i, o)
	if done {
		return
	}
	cl := &n.clients[i]
	value, leader := cl.value, cl.office
	held, restore, err := c.p.readRefresh(c.send(x, n, o, op, c.p.refresh(value, leader)), leader)
	o.look, o.err = &look{value: value, held: held}, err
	switch {
	case !held:
		n.clients[i] = c.ended(*cl)
		if leader {
			c.resign(x, n, i, o, value)
		}
		return
	case restore:
		c.send(x, n, o, "election_announce.lua (restore)", c.p.announce(value))
	}
	cl.deadline = at + ttl - drift
}

// announce is a candidate holding the election's lock taking office; one
// that cannot (its lease ended) releases its grant and fails
// (election.announce).
func (c *checker) announce(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	took, err := c.p.readAnnounce(c.send(x, n, o, "election_announce.lua", c.p.announce(cl.value)))
	o.err = err
	if took {
		cl.office, o.office = true, cl.value
		return
	}
	c.releaseHeld(x, n, i, o)
}

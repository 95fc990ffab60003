package model

import (
	"fmt"
	"slices"
)

// moveKind is what one step does.
type moveKind uint8

// A participant's moves.
const (
	mProbe    moveKind = iota // begin an acquire that waits: its probe
	mTry                      // begin a lone try (TryObtain, TryAcquire)
	mSettle                   // a lone try settles a resource whose queue goes first
	mAttempt                  // a waiter's attempt (wait.lua): at once, or when its timer fires
	mReceive                  // a waiter reads a grant message in flight
	mHear                     // a Locker hears a grant message for a waiter that left
	mGiveUp                   // a waiter gives up
	mRelease                  // a holder releases
	mServeOn                  // a releaser goes on serving the queue past dead entries
	mRefresh                  // a holder refreshes
	mAnnounce                 // a candidate holding the election's lock takes office
	mRead                     // the observer reads the election's leader
	mPause                    // stop acting while time passes
	mResume                   // act again
	mDie                      // never act again
	mTimeout                  // a waiter's context ends at its deadline (Config.Patience)
	mResend                   // send again the command whose reply was lost
	mBreak                    // the operator breaks the lock (Core.Break)
	mDraw                     // a grant's holder draws its token from the source (Config.Source)
	mStamp                    // it stamps the token into its grant (refresh.lua with ARGV[4])
)

// operatorWho is the operator's move's who (operator.go).
const operatorWho int8 = -2

// The environment's moves.
const (
	mAdvance   moveKind = iota + 32 // the clock to the next deadline
	mLose                           // a message in flight is lost
	mDuplicate                      // a message in flight is delivered twice
	mForge                          // a grant message nobody granted
	mRestart                        // the server loses every key
	mStep                           // the server's clock steps by one of Config.Steps
)

var moveNames = map[moveKind]string{
	mProbe: "probe", mTry: "try", mSettle: "settle", mAttempt: "attempt", mReceive: "receive",
	mHear: "hears", mGiveUp: "give up", mRelease: "release", mServeOn: "serve on", mRefresh: "refresh",
	mAnnounce: "announce", mRead: "read leader", mPause: "pause", mResume: "resume", mDie: "die",
	mTimeout: "times out", mResend: "resends", mBreak: "break", mDraw: "draws", mStamp: "stamps", mAdvance: "advance", mLose: "lose", mDuplicate: "duplicate", mForge: "forge",
	mRestart: "restart", mStep: "step",
}

// move is one step: a participant's (who), the environment's (who -1) or
// the operator's (operatorWho);
// arg is a message's index in flight, the participant a forged message
// goes to, or the index in Config.Steps of a step of the clock; lose, when
// not 0, which of the move's state-changing commands has its reply lost
// (1 for the first), to be sent again by a resend.
type move struct {
	kind           moveKind
	who, arg, lose int8
}

func (m move) String() string {
	s := moveNames[m.kind]
	switch {
	case m.who == operatorWho:
		s = "operator " + s
	case m.who >= 0:
		s = name(int(m.who)) + " " + s
	}
	switch m.kind {
	case mReceive, mHear, mLose, mDuplicate:
		s += fmt.Sprintf(" #%d", m.arg)
	case mForge:
		s += " to " + name(int(m.arg))
	case mStep:
		s += fmt.Sprintf(" #%d", m.arg)
	}
	switch m.lose {
	case 0:
	case 1:
		s += " (reply lost)"
	default:
		s += fmt.Sprintf(" (reply %d lost)", m.lose)
	}
	return s
}

// moves are the moves enabled in w. A participant that is not paused acts
// at once when it must (a waiter about to attempt, or whose timer fired or
// deadline passed; a lone try about to settle; a releaser serving the queue
// on; a Locker with a grant message for a waiter that left; a lost reply's
// sender a read timeout after it sent; a grant's holder about to draw its
// token or stamp it; a holder whose plain command missed, about to send the
// script): time passes only when none must.
// The moves that lose a reply are not here: variants makes them from a
// move's outcome, which tells how many state-changing commands it sent.
func (c *checker) moves(w *world) []move {
	var ms []move
	mustAct := false
	for i := range w.clients {
		ms = c.clientMoves(w, i, ms)
		mustAct = mustAct || c.due(w, i)
	}
	ms, due := c.operatorMoves(w, ms)
	mustAct = mustAct || due
	if !mustAct && c.nextDeadline(w) > w.rs.clock {
		ms = append(ms, move{kind: mAdvance, who: -1})
	}
	return c.faultMoves(w, ms)
}

// due says whether participant i must act before time may pass.
func (c *checker) due(w *world, i int) bool {
	cl := &w.clients[i]
	switch {
	case cl.paused || cl.phase == dead:
		return false
	case cl.pending != nil:
		return w.local() >= cl.pending.at+readTimeout
	case cl.serveUntil != 0 || cl.phase == ready || cl.phase == settling || cl.stamps() ||
		cl.phase == sleeping && cl.timer <= w.local() || cl.plain != plainNone:
		return true
	case cl.waiting() && cl.timedOut(w.local()):
		return true
	}
	for _, m := range w.flight {
		if m.to == i && w.route(m) == toStrays {
			return true
		}
	}
	return false
}

// clientMoves appends participant i's moves to ms. A releaser serving the
// queue on does nothing else until it is done (its Held.Release has not
// returned), and one whose reply was lost nothing but send the command
// again.
func (c *checker) clientMoves(w *world, i int, ms []move) []move {
	cl := &w.clients[i]
	add := func(k moveKind) { ms = append(ms, move{kind: k, who: int8(i), arg: -1}) }
	if cl.phase == dead {
		return ms
	}
	if w.left.Die > 0 {
		add(mDie)
	}
	if cl.paused {
		add(mResume)
		return ms
	}
	if w.left.Pause > 0 {
		add(mPause)
	}
	if cl.pending != nil {
		add(mResend)
		return ms
	}
	if cl.serveUntil != 0 {
		add(mServeOn)
		return ms
	}
	for j, m := range w.flight {
		if m.to == i && w.route(m) == toStrays {
			ms = append(ms, move{kind: mHear, who: int8(i), arg: int8(j)})
		}
	}
	switch cl.phase {
	case idle:
		if (c.cfg.Cycles == 0 || cl.cycle < c.cfg.Cycles) && (!c.cfg.ArriveAtStart || w.local() == base) {
			add(mProbe)
			if c.cfg.Tries {
				add(mTry)
			}
		}
		if c.cfg.Kind == Election {
			add(mRead)
		}
	case ready, sleeping:
		ms = c.waiterMoves(w, i, ms)
	case settling:
		add(mSettle)
	case drawing:
		add(mDraw)
	case stamping:
		add(mStamp)
	case holding:
		switch cl.plain {
		case refreshMissed: // its refresh goes on with the script
			add(mRefresh)
		case releaseMissed: // and its release
			add(mRelease)
		default:
			add(mRelease)
			add(mRefresh)
			if c.cfg.Kind == Election && !cl.office {
				add(mAnnounce)
			}
		}
	}
	return ms
}

// waiterMoves appends waiter i's moves to ms: its attempt (at once, or
// once its timer fired), giving up, reading the oldest message in flight
// to it (notify.Waiter.Grant: its Locker keeps them all, oldest first); or,
// once its deadline has passed, only leaving (its context ended: whatever
// it asks Redis fails, and its sleep ends).
func (c *checker) waiterMoves(w *world, i int, ms []move) []move {
	cl := &w.clients[i]
	if cl.timedOut(w.local()) {
		return append(ms, move{kind: mTimeout, who: int8(i), arg: -1})
	}
	if cl.phase == ready || cl.timer <= w.local() {
		ms = append(ms, move{kind: mAttempt, who: int8(i), arg: -1})
	}
	if w.left.GiveUp > 0 {
		ms = append(ms, move{kind: mGiveUp, who: int8(i), arg: -1})
	}
	if cl.phase == sleeping {
		if j := slices.IndexFunc(w.flight, func(m msg) bool { return m.to == i && w.route(m) == toWaiter }); j >= 0 {
			ms = append(ms, move{kind: mReceive, who: int8(i), arg: int8(j)})
		}
	}
	return ms
}

// faultMoves appends the environment's faults enabled in w to ms.
func (c *checker) faultMoves(w *world, ms []move) []move {
	for j := range w.flight {
		if w.left.Lose > 0 {
			ms = append(ms, move{kind: mLose, who: -1, arg: int8(j)})
		}
		if w.left.Dup > 0 {
			ms = append(ms, move{kind: mDuplicate, who: -1, arg: int8(j)})
		}
	}
	for i := range w.clients {
		alone := !c.cfg.ForgeAlone || !slices.ContainsFunc(w.flight, func(m msg) bool { return m.to == i })
		if w.left.Forge > 0 && w.clients[i].waiting() && alone {
			ms = append(ms, move{kind: mForge, who: -1, arg: int8(i)})
		}
	}
	if w.left.Restart > 0 {
		ms = append(ms, move{kind: mRestart, who: -1})
	}
	for j := range c.steps {
		if w.left.Step > 0 {
			ms = append(ms, move{kind: mStep, who: -1, arg: int8(j)})
		}
	}
	return ms
}

// nextDeadline is the next time after now, on the server's clock, when
// something happens on its own: a key or a permit expires, the timer of a
// waiter that is not paused fires, or the keeper of a holder that is not
// paused would refresh (the Go client's refreshes ttl/3 after the last: the
// holder may, and need not). It is now when nothing will. The
// participants' times are on their own clock, skew behind the server's.
func (c *checker) nextDeadline(w *world) int64 {
	now := w.rs.clock
	next := int64(-1)
	at := func(t int64) {
		if t > now && (next < 0 || t < next) {
			next = t
		}
	}
	atLocal := func(t int64) { at(t + w.skew) }
	for _, k := range w.rs.keys {
		if k.ttl > 0 {
			at(now + k.ttl)
		}
	}
	for i := range w.clients {
		switch cl := &w.clients[i]; {
		case cl.paused:
		case cl.pending != nil:
			atLocal(cl.pending.at + readTimeout)
		case cl.phase == sleeping:
			atLocal(cl.timer)
			if cl.giveUpAt != 0 {
				atLocal(cl.giveUpAt)
			}
		case cl.phase == holding:
			atLocal(cl.renew())
		}
	}
	if p := w.op.pending; p != nil {
		atLocal(p.at + readTimeout)
	}
	for _, t := range c.p.deadlines(w.rs) {
		at(t)
	}
	if next < 0 {
		return now
	}
	return next
}

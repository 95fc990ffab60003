package model

import (
	"slices"
	"strconv"

	"github.com/leasekit/leasekit/scripts"
)

// A correctness lock's or an election's grants under Config.Source, as
// internal/lease's tokens.go makes them: the scripts grant as they grant any
// fenced lock (the Redis counter's token, "owner:token"), then the grant's
// holder draws its token from the token source (mDraw), a counter the model
// keeps beside the server (world.source: linearizable, strictly
// increasing, lost by no restart and moved by no step of the server's
// clock), and stamps it into its grant (mStamp): refresh.lua with ARGV[4],
// which stores the stamped grant and restarts the lease. It holds only once
// the stamp's reply says held. A stamp that finds the lease gone fails the
// grant as a late one: a lone try's acquire ends, any other waits on (an
// acquire's probe subscribes first). A draw at or after the grant's lease
// deadline is the source's call timing out (ErrNoToken): the grant is
// released, and the acquire ends. Each is a move of its own, so that other
// moves and faults come between grant, draw and stamp; a stamp's reply may
// be lost, and the stamp sent again (Faults.Resend).

// toDraw is cl, whose acquire Redis granted value from start (ms) on, by a
// move of kind via, about to draw its token; with drawEarly, about to stamp
// the token it drew as its acquire began. It keeps its entry and its place
// among the waiters, for when it waits on.
func (c *checker) toDraw(cl client, value string, start int64, via moveKind) client {
	d := cl
	d.phase, d.value, d.deadline, d.timer = drawing, value, start+ttl-drift, 0
	d.office, d.handed, d.token = false, via == mReceive, ""
	if c.cfg.drawEarly {
		d.token = cl.token
	}
	d.lone, d.waiter = via == mTry || via == mSettle, via == mAttempt || via == mReceive
	if !d.waiter {
		d.e = entry{}
	}
	if d.token != "" {
		d.phase = stamping
	}
	return d
}

// draw is participant i drawing its grant's token from the source, with
// the Redis token as the floor the source may start above (etcdtokens).
// One past the grant's lease deadline is too late: the source's call
// ended with the deadline (noToken).
func (c *checker) draw(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	if o.at >= cl.deadline {
		c.noToken(x, n, i, o)
		return
	}
	cl.token, cl.phase = c.drawToken(n, c.p.parseValue(cl.value).token), stamping
}

// drawToken draws the next token from the source in n: as etcdtokens does,
// the first draw makes floor (at least 1) the base, and each token is the
// base plus the draws so far.
func (c *checker) drawToken(n *world, floor string) string {
	last, _ := strconv.ParseUint(n.source, 10, 64)
	if n.source == "" {
		f, _ := strconv.ParseUint(floor, 10, 64)
		last = max(f, 1)
	}
	n.source = strconv.FormatUint(last+1, 10)
	return n.source
}

// noToken is participant i's draw timing out (ErrNoToken): it releases its
// grant, and its acquire ends. A waiter leaves as a give-up does, taking its
// entries out of the queue and ending any grant of the owner's (a grant
// message forged while the real one went to its entry), in one call: the Go
// client's two (acquire.stamped's release, then waiter.leave's) do no more.
func (c *checker) noToken(x *executor, n *world, i int, o *outcome) {
	cl := n.clients[i]
	o.noToken = true
	cmd := c.p.releaseUnmarked(cl.value)
	if cl.waiter {
		cmd = c.p.release(cl.value, &cl.e)
	}
	c.releaseOp(x, n, i, o, c.p.releaseName()+" (no token)", cmd)
	n.clients[i] = c.ended(n.clients[i])
}

// stamp is participant i stamping the token it drew into its grant
// (acquire.stamped): a look at the grant, which counts the stamped grant
// too (a resend finds it). Held, the participant holds the stamped grant,
// its lease measured from the stamp's first send; its Locker remembers it
// when a grant message handed it over (strays.took, after the stamp).
// Not held, the grant was late: the acquire waits on, or a lone try ends.
func (c *checker) stamp(x *executor, n *world, i int, o *outcome) {
	cl := n.clients[i]
	value := scripts.GrantValue(n.owner(i), mustToken(cl.token))
	held, err := c.p.readStamp(c.send(x, n, o, c.p.refreshName()+" (stamp)", c.p.stamp(cl.value, value)))
	if c.cfg.unchecked {
		held = err == nil
	}
	o.look, o.err = &look{value: cl.value, stamped: value, held: held}, err
	if !held {
		o.lateStamp = true
		c.waitOn(x, n, i, o)
		return
	}
	o.self = value
	o.stamp = &stamped{token: cl.token, grant: c.p.parseValue(cl.value).token}
	o.restamped = o.replay != nil && c.p.heldAs(o.before, value)
	o.floorless = n.topGrant != "" && !above(o.stamp.grant, n.topGrant)
	h := c.granted(cl, value, o.at)
	if cl.handed {
		h.handed, h.e = true, entry{gen: cl.e.gen}
		if !c.cfg.forgetful {
			h.took = append(slices.Clone(cl.took), took{cycle: cl.cycle, value: value})
		}
	}
	n.clients[i] = h
}

// stamped is what a stamp that held stored: the token drawn, and the Redis
// token of the grant it replaced.
type stamped struct{ token, grant string }

// mustToken is a drawn token as a number: the source draws only decimal
// tokens.
func mustToken(t string) uint64 {
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n == 0 {
		panic("model: a stamp without a drawn token")
	}
	return n
}

// waitOn is participant i after its stamp found its lease gone (Errors.Late):
// a lone try's acquire ends; an acquire's probe subscribes (once) and
// attempts, as after any late grant; a waiter attempts again at once, with
// its entry, at its place. To the checker it is queued no more until then.
func (c *checker) waitOn(x *executor, n *world, i int, o *outcome) {
	cl := n.clients[i]
	if cl.lone {
		n.clients[i] = c.ended(cl)
		return
	}
	w := client{phase: ready, paused: cl.paused, subscribed: cl.subscribed, cycle: cl.cycle, e: cl.e, seq: cl.seq,
		took: cl.took, serveUntil: cl.serveUntil, resign: cl.resign}
	if c.cfg.drawEarly {
		w.token = cl.token
	}
	subscribe := !w.subscribed
	w.subscribed = true
	n.clients[i] = w
	if subscribe {
		c.exec(x, n, o, "", subscribeOp(channel(name(i)), true))
	}
}

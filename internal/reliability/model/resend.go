package model

import (
	"fmt"
	"slices"
)

// A lost reply, as go-redis meets it: a command ran on the server, its
// reply never reached the sender (a read timeout, a broken connection),
// and go-redis sends the same command again, with the same keys and
// arguments, up to a read timeout later; the sender reads the second reply
// only. The move whose command it was is cut at that command (the server
// keeps what it did), other participants and the environment move meanwhile,
// and a resend move resumes it: the move runs again from the mover's state
// before it, at the time it first ran, reading the replies it had read
// before the lost one as they were, and sending the lost command again.

// readTimeout is go-redis's default ReadTimeout, ms: a lost reply keeps its
// sender waiting at most this long before the command is sent again.
const readTimeout = 3000

// resend is a command whose reply was lost, which its sender is about to
// send again: what its move needs to resume. A value, shared between
// worlds, never changed.
type resend struct {
	move move  // the move; lose says which of its state-changing commands
	at   int64 // when the move ran, on the sender's clock (ms)
	// replies are those the move read before the lost one, in order, of
	// queries too; cmd is the lost command, and op its name.
	replies []any
	cmd     []string
	op      string
	text    string // the message the move read (receive, hear), if any
	// held says the sender's grant (for the operator, a live one) was on
	// the server before the move's first send: what a release (a Break)
	// sent again must report. deleted says the lost command was a plain
	// DELEX (plain.go) whose first send deleted the grant.
	held, deleted bool
	pre           client // the participant before the move (none for the operator)
}

// lostReply is the panic that cuts a move at the command whose reply is
// lost; cut recovers it.
type lostReply struct{}

// send runs cmd, a command that may change the server, for the move that
// does o, as op, and returns the reply the mover reads (call).
func (c *checker) send(x *executor, n *world, o *outcome, op string, cmd []string) any {
	return c.call(x, n, o, op, cmd, true)
}

// query runs cmd, a command that only reads, as send does.
func (c *checker) query(x *executor, n *world, o *outcome, op string, cmd []string) any {
	return c.call(x, n, o, op, cmd, false)
}

// call runs cmd for the move that does o (changes: cmd may change the
// server) and returns its reply. A move resumed after a lost reply
// (o.replay) does not run again the calls before the lost one: their
// replies come from the replay; the lost one runs again, and must be the
// same command. In a move cut at a lost reply (o.lose), the state-changing
// call it names runs, and then panics with lostReply.
func (c *checker) call(x *executor, n *world, o *outcome, op string, cmd []string, changes bool) any {
	if changes {
		o.sends++
	}
	o.replayed = false
	if r := o.replay; r != nil {
		switch k := len(o.replies); {
		case k < len(r.replies):
			o.replies = append(o.replies, r.replies[k])
			o.replayed = true
			return r.replies[k]
		case k == len(r.replies) && !slices.Equal(cmd, r.cmd):
			panic(fmt.Sprintf("model: %s resumed by sending %s, not %s, whose reply was lost", who(o.move), op, r.op))
		case k == len(r.replies):
			op += " (sent again)"
		}
	}
	lost := changes && o.sends == o.lose
	label := op
	if lost {
		label += " (reply lost)"
	}
	reply := c.exec(x, n, o, label, commandOp(cmd))
	if lost {
		o.lost, o.lostOp, o.lostReply = cmd, op, reply
		panic(lostReply{})
	}
	o.replies = append(o.replies, reply)
	return reply
}

// cut runs the move of o up to its state-changing command o.lose, which
// runs and whose reply is lost: the mover is left as it was when it sent
// that command, waiting to send it again (resume), with what it needs for
// that. What the move's calls read before it is not judged now (its claims
// about the lock may be undone by the lost command) nor when the move
// resumes.
func (c *checker) cut(x *executor, n *world, o *outcome, text string) {
	i := int(o.move.who)
	r := &resend{move: o.move, at: o.at, text: text}
	r.move.lose = int8(o.lose)
	if i == int(operatorWho) {
		r.held = n.op.target != grant{}
	} else {
		r.pre = n.clients[i]
		r.held = c.p.heldAs(n.rs, r.pre.value)
	}
	defer func() {
		p := recover()
		if _, ok := p.(lostReply); !ok {
			if p == nil {
				p = fmt.Sprintf("model: %v sent fewer than %d commands", o.move, o.lose)
			}
			panic(p)
		}
		r.replies, r.cmd, r.op = o.replies, o.lost, o.lostOp
		r.deleted = o.lost[0] == "DELEX" && o.lostReply == int64(1)
		o.handed = nil
		if i == int(operatorWho) {
			n.op.pending = r
			return
		}
		n.clients[i].pending = r
		c.seenLost(n, i, o)
	}()
	c.do(x, n, o, text)
}

// seenLost notes what the checker sees of the lost reply of participant
// i's move o: the order of the waiters follows the server's queue, not the
// replies that reach them, so an attempt whose reply was lost has queued.
func (c *checker) seenLost(n *world, i int, o *outcome) {
	if o.move.kind == mAttempt {
		if a, err := c.p.readWait(o.lostReply, n.owner(i)); err == nil {
			c.seen(n, i, a, n.clients[i].e.place == "")
		}
	}
}

// resume takes the lost command off the mover of a resend (o.move), and
// sets o to run the move it cut again: from the mover as it was before
// that move (the operator's moves change its state only after their
// command), at the time it ran, with the replies it read. What the checker
// saw of it meanwhile stays. It returns the message the move read.
func (c *checker) resume(n *world, o *outcome) string {
	i := int(o.move.who)
	if i == int(operatorWho) {
		r := n.op.pending
		n.op.pending = nil
		o.replay, o.move, o.at = r, r.move, r.at
		o.move.lose = 0
		return ""
	}
	cl := &n.clients[i]
	r := cl.pending
	seq, queued := cl.seq, cl.queued
	*cl = r.pre
	cl.seq, cl.queued = seq, queued
	o.replay, o.move, o.at = r, r.move, r.at
	o.move.lose = 0
	return r.text
}

// variants are m, which did o, with the reply of one of its state-changing
// commands lost, one for each, while the budget lasts. A resend has none:
// a move loses one reply at most (go-redis may lose the resend's too, and
// send it a third time, which shows nothing the second does not).
func (c *checker) variants(w *world, m move, o *outcome) []move {
	if w.left.Resend == 0 || m.lose != 0 || m.kind == mResend {
		return nil
	}
	var vs []move
	for k := 1; k <= o.sends; k++ {
		v := m
		v.lose = int8(k)
		vs = append(vs, v)
	}
	return vs
}

package model

import (
	"strconv"

	"github.com/leasekit/leasekit/scripts"
)

// The plain path (Config.Plain), as internal/lease's plain.go serves an
// efficiency lock's lease that no grant message handed (Held.handed): a
// refresh sends SET key owner IFEQ owner PX ttl first, and a release DELEX
// key IFEQ owner. A plain command that misses (the value is not the bare
// grant: the mark of waiters, gone, another owner's) changed nothing, and
// the holder's next move runs the script as before (refresh.lua,
// release.lua with its mark): two round trips, between which anyone may
// move, though time passes only while the holder is paused or waits to
// send a command again. A release whose DELEX was sent again after its
// reply was lost (the second send finds nothing) reports a script reply of
// gone or another owner's as released (Held.end); broken stays broken.
//
// The model uses the plain path for every such lease: the Core's choice
// to skip it for a lock seen contended in the last second (keySet.busy)
// leaves the scripts alone, which every other check explores.
//
// miniredis has DELEX IFEQ but not SET IFEQ: the model runs SET IFEQ as its
// exact atomic equivalent in a script (setIFEQ), through the checker's Lua
// as any script. A real server that lacks DELEX (Redis before 8.4) runs
// DELEX as its equivalent script too (delexIFEQ), so that a replay
// (real.go) runs on Redis 7 as on 8.

// setIFEQ is SET KEYS[1] ARGV[1] IFEQ ARGV[1] PX ARGV[2], exactly: the
// value set and the ttl restarted only if the key holds the string ARGV[1];
// reply OK, else nil.
const setIFEQ = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return false`

// delexIFEQ is DELEX KEYS[1] IFEQ ARGV[1], exactly: the key deleted only if
// it holds the string ARGV[1]; reply 1, else 0.
const delexIFEQ = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

// plainStep is where a holder is in a refresh or release whose plain
// command missed: its next move sends the script.
type plainStep uint8

const (
	plainNone     plainStep = iota
	refreshMissed           // SET IFEQ replied nil: refresh.lua next
	releaseMissed           // DELEX replied 0: release.lua next
)

// plainLease says whether participant cl's refreshes and releases take the
// plain path (Held.plainLock): under Config.Plain, an efficiency lock's
// lease that no grant message handed it.
func (c *checker) plainLease(cl *client) bool {
	return c.cfg.Plain && c.p.kind == Efficiency && !cl.handed
}

// plainSet is a refresh's plain command (Core.plainRefresh): SET IFEQ PX,
// as its script (setIFEQ).
func (p protocol) plainSet(value string) []string {
	return []string{"EVAL", setIFEQ, "1", lockKey, value, strconv.Itoa(ttl)}
}

// readPlainSet reads plainSet's reply: whether it restarted the lease.
func (p protocol) readPlainSet(reply any) (bool, error) {
	switch reply {
	case "OK":
		return true, nil
	case nil:
		return false, nil
	}
	return false, unexpected(reply)
}

// plainDelete is a release's plain command (Core.plainDelete).
func (p protocol) plainDelete(value string) []string {
	return []string{"DELEX", lockKey, "IFEQ", value}
}

// readPlainDelete reads plainDelete's reply: whether it deleted the grant.
func (p protocol) readPlainDelete(reply any) (bool, error) {
	switch reply {
	case int64(1):
		return true, nil
	case int64(0):
		return false, nil
	}
	return false, unexpected(reply)
}

// broken says whether a release's reply says an operator broke the lease.
func (p protocol) broken(reply any) bool {
	e, err := scripts.ReadEnd(reply)
	return err == nil && e.Lease == scripts.LeaseBroken
}

// plainRefresh is the plain path of participant i's refresh. It returns
// when the refresh was sent, on the participant's clock (the lease is
// measured from there: Held.refresh), the name of the script to run, and
// whether the move is over: the plain command restarted the lease, or
// missed (the script is then the holder's next move). When it is not, the
// script runs now: the plain path is not this lease's, or its plain
// command missed in the holder's move before.
func (c *checker) plainRefresh(x *executor, n *world, i int, o *outcome) (int64, string, bool) {
	cl := &n.clients[i]
	switch {
	case cl.plain == refreshMissed:
		at := cl.plainAt
		cl.plain, cl.plainAt = plainNone, 0
		return at, c.p.refreshName() + " (SET IFEQ missed)", false
	case !c.plainLease(cl):
		return o.at, c.p.refreshName(), false
	}
	value := cl.value
	ok, err := c.p.readPlainSet(c.send(x, n, o, "SET IFEQ PX", c.p.plainSet(value)))
	switch {
	case err != nil:
		o.fail(err)
	case ok:
		o.look = &look{value: value, held: true}
		cl.deadline = o.at + ttl - drift
	default:
		cl.plain, cl.plainAt = refreshMissed, o.at
		o.missed = true
	}
	return o.at, "", true
}

// plainRelease is participant i's release on the plain path: DELEX, and
// when it missed, release.lua in the holder's next move. That one reports
// released, after a DELEX sent again (its first reply lost), when the
// script finds the lease gone or another owner's (Held.end); the look is
// judged then by what the server held before the DELEX was first sent, as
// a release sent again is (judgeLook).
func (c *checker) plainRelease(x *executor, n *world, i int, o *outcome) {
	cl := &n.clients[i]
	value := cl.value
	if cl.plain != releaseMissed {
		done, err := c.p.readPlainDelete(c.send(x, n, o, "DELEX IFEQ", c.p.plainDelete(value)))
		switch {
		case err != nil:
			o.fail(err)
		case done:
			o.look = &look{value: value, held: true, release: true}
			n.clients[i] = c.ended(*cl)
		default:
			// The DELEX is the move's one command: a resend of the move
			// (o.replay) sent it again.
			cl.plain, o.missed = releaseMissed, true
			// Held.end applies its rule only to a delete sent before
			// the lease's local deadline.
			if r := o.replay; r != nil && o.at < cl.deadline {
				cl.resent = &resentDelete{held: r.held, deleted: r.deleted}
			}
		}
		return
	}
	resent := cl.resent
	held, reply := c.releaseRead(x, n, i, o, c.p.releaseName()+" (DELEX missed)", c.p.release(value, nil))
	if resent != nil && !held && !c.p.broken(reply) {
		held = true
		o.resentDelete = true
	}
	n.clients[i] = c.ended(n.clients[i]) // with the serving on releaseRead began
	o.look = &look{value: value, held: held, release: true, resent: resent}
}

// resentDelete is what the checker knows of a plain release's DELEX that
// was sent again after its reply was lost: whether the server held the
// grant before its first send, and whether that send deleted it.
type resentDelete struct{ held, deleted bool }

package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/scripts"
)

// The plain path: an uncontended efficiency lock refreshed and released
// with no script, where the server has compare-and-set commands of its own,
// and with the least script where it has not.
// SET key owner IFEQ owner PX ttl restarts the lease (Redis 8.4 and later,
// Valkey 8.1 and later), and DELEX key IFEQ owner (Redis 8.4 and later,
// Valkey 9.2) or DELIFEQ key owner (Valkey 9.0 and later) deletes it. Both
// match the grant's value exactly, and a value with the mark of waiters
// (scripts/wire.go) is never the bare owner id: once a waiter has queued,
// the plain command finds no match, changes nothing, and the script runs as
// it would have, handing the lock on. So FIFO handoff, the marks and the
// replies of the scripts stay as they are; the plain path only saves the
// script where there is nothing for it to do.
//
// Where the server has neither command (Redis before 8.4, Valkey before
// 9.0), the plain path runs their equivalents in Lua, expire_if_eq and
// del_if_eq: a GET and a PEXPIRE or DEL, the least a script can do, and no
// more than redsync's release; a miss runs the full script as above.
//
// What the server has is asked once per Core, before its first refresh or
// release that the plain path could serve: COMMAND INFO DELEX DELIFEQ, one
// round trip, which no server answers with an error for a command it
// lacks; a server with either has SET IFEQ too. Until the answer is in
// (another call may be asking), and where the question fails (an ACL that
// refuses COMMAND, miniredis, which answers with its whole table), the full
// scripts serve every call. A plain command the server then refuses as
// unknown, as bad syntax or by its ACL is not sent again by that Core, and
// the call goes on with the script. An error reply means the command did
// nothing.
//
// A refresh sent twice (its reply lost, go-redis sends it again) restarts
// the lease twice, as the script does. A delete sent twice finds nothing the
// second time, and unlike release.lua it leaves no mark to reply from. So a
// release counts how often the delete was written (sent): when more than
// once, or when an earlier call's delete may have reached the server, and
// it was sent before the lease's deadline, a release that then finds the
// grant gone or another owner's reports it released, as the mark would
// have (though also when a restart without persistence had taken the lease
// before the first send: the model checker's TestPlainResentDelete); one
// that finds it broken by an operator reports that, from the break's mark.

// capability is what a Core knows of one plain command.
type capability = int32

const (
	_ capability = iota // untried: the probe has not answered
	works
	refused
)

// plain is a Core's knowledge of the server's plain commands.
type plain struct {
	setIFEQ atomic.Int32 // capability of SET IFEQ PX
	delex   atomic.Int32 // of DELEX IFEQ
	delifeq atomic.Int32 // of DELIFEQ
	// lua is the capability of the commands' equivalents in Lua,
	// expire_if_eq and del_if_eq: where the server answered that it has
	// neither command.
	lua   atomic.Int32
	asked atomic.Bool // the question went out, or is going
}

// The plain path's scripts, where the server has not the commands.
var (
	delIfEqScript    = NewScript(scripts.DelIfEq)
	expireIfEqScript = NewScript(scripts.ExpireIfEq)
)

// plainQuestion is the question of the plain commands.
var plainQuestion = []any{"COMMAND", "INFO", "DELEX", "DELIFEQ"}

// knowPlain asks the question, if no call of the Core's has: once, and
// again after an answer that did not arrive.
func (c *Core) knowPlain(ctx context.Context) {
	if c.plain.asked.CompareAndSwap(false, true) {
		c.plainAnswer(c.cfg.Conn.Do(ctx, plainQuestion...))
	}
}

// plainAnswer reads the answer to the question (see above).
func (c *Core) plainAnswer(answer any, err error) {
	infos, ok := answer.([]any)
	if err == nil && !ok {
		err = fmt.Errorf("COMMAND INFO answered %T, not an array", answer)
	}
	var re port.ServerError
	if err != nil && !errors.As(err, &re) {
		c.plain.asked.Store(false) // not answered: ask again
		return
	}
	has := func(i int) capability {
		if err != nil || len(infos) != 2 || infos[i] == nil {
			return refused
		}
		return works
	}
	c.plain.delex.Store(has(0))
	c.plain.delifeq.Store(has(1))
	commands := has(0) == works || has(1) == works
	c.plain.setIFEQ.Store(refused)
	c.plain.lua.Store(refused)
	switch {
	case commands:
		c.plain.setIFEQ.Store(works)
	case err == nil && len(infos) == 2:
		c.plain.lua.Store(works) // a server that answered: neither command
	}
}

// plainLock reports whether the lease is one the plain path serves: an
// efficiency lock's, not handed by a grant message (whose value may carry
// the mark of waiters, and whose release does more: Held.release).
//
// A lock seen contended in the last busyFor (keySet.busy) is served by the
// scripts alone: its value likely carries the mark, and the plain
// command's miss would cost a round trip more on every handoff.
func (h *Held) plainLock() bool {
	_, lock := h.keys.kind.(*lock)
	return lock && !h.core.cfg.Fenced && h.handed == nil && time.Now().UnixNano()-h.keys.busy.Load() > int64(busyFor)
}

// busyFor is how long a lock seen contended skips the plain path.
const busyFor = time.Second

// contended records that the lock is contended now.
func (k *keySet) contended() { k.busy.Store(time.Now().UnixNano()) }

// plainRefresh restarts the lease at ttl with SET IFEQ PX. It reports
// whether it did; when it did not (no match, or the server has no such
// SET), the caller runs the script. err is a failure to reach Redis.
func (c *Core) plainRefresh(ctx context.Context, lk *keySet, value string, ttl time.Duration) (bool, error) {
	c.knowPlain(ctx)
	can, done := &c.plain.setIFEQ, false
	var err error
	switch {
	case can.Load() == works:
		_, err = c.cfg.Conn.Do(ctx, "SET", lk.key, value, "IFEQ", value, "PX", Millis(ttl))
		done = err == nil
		if errors.Is(err, port.Nil) {
			err = nil
		}
	case c.plain.lua.Load() == works:
		can = &c.plain.lua
		var n int64
		n, err = port.Int64(c.run(ctx, expireIfEqScript, []any{lk.keyArg}, value, Millis(ttl)))
		done = err == nil && n == 1
	default:
		return false, nil
	}
	switch {
	case done:
		return true, nil
	case err == nil:
		lk.contended()
		return false, nil // not the bare grant: the script says why
	}
	return false, c.plainFailed(can, err)
}

// plainDelete deletes the lock at lk if it holds value exactly, with DELEX
// IFEQ or DELIFEQ. It reports whether it deleted it (done), and whether the
// delete may have reached Redis more than once (resent: go-redis wrote it
// again after a lost reply, or a redirect; with err, whether it was written
// at all). When not done, the caller runs the script. err is a failure to
// reach Redis: the delete may have run.
func (c *Core) plainDelete(ctx context.Context, lk *keySet, value string) (done, resent bool, err error) {
	c.knowPlain(ctx)
	for _, cmd := range [...]struct {
		can  *atomic.Int32
		args func(v *sentArg) []any
	}{
		{&c.plain.delex, func(v *sentArg) []any { return []any{"DELEX", lk.key, "IFEQ", v} }},
		{&c.plain.delifeq, func(v *sentArg) []any { return []any{"DELIFEQ", lk.key, v} }},
		{&c.plain.lua, nil},
	} {
		if cmd.can.Load() != works {
			continue
		}
		v := &sentArg{value: value}
		var reply any
		var err error
		if cmd.args != nil {
			reply, err = c.cfg.Conn.Do(ctx, cmd.args(v)...)
		} else {
			reply, err = c.delIfEq(ctx, lk, v)
		}
		n, err := port.Int64(reply, err)
		if err == nil {
			if n != 1 {
				lk.contended()
			}
			return n == 1, v.sent.Load() > 1, nil
		}
		if err = c.plainFailed(cmd.can, err); err != nil {
			return false, v.sent.Load() > 0, err
		}
		if cmd.can.Load() == works {
			return false, false, nil // refused this once (OOM, ...): the script
		}
	}
	return false, false, nil
}

// delIfEq runs del_if_eq with v, whose count of writes says whether it
// ran twice: a send the server refused with NOSCRIPT ran nothing, so the
// count starts again once the script is loaded.
func (c *Core) delIfEq(ctx context.Context, lk *keySet, v *sentArg) (any, error) {
	keys := []any{lk.keyArg}
	reply, err := c.cfg.Conn.Do(ctx, delIfEqScript.evalSHA(keys, []any{v})...)
	if !noScript(err) {
		return reply, err
	}
	if delIfEqScript.load(ctx, c.cfg.Conn) == nil {
		v.sent.Store(0)
	}
	return c.run(ctx, delIfEqScript, keys, v)
}

// plainFailed sorts the failure err of a plain command whose capability is
// can: an error reply saying the server does not have or allow it marks it
// refused, and is nil (the caller runs the script); another error reply is
// nil too (the command did nothing; the script meets the cause itself, or
// not); a failure to reach Redis is returned.
func (c *Core) plainFailed(can *atomic.Int32, err error) error {
	var re port.ServerError
	if !errors.As(err, &re) || transient(err) {
		return err
	}
	if notOffered(re.Error()) {
		can.Store(refused)
	}
	return nil
}

// notOffered reports whether the error reply msg refuses a command as one
// the server does not have ("ERR unknown command", "ERR syntax error" for a
// SET option it lacks, "ERR wrong number of arguments") or does not allow
// (NOPERM: the ACL).
func notOffered(msg string) bool {
	for _, p := range []string{"ERR unknown command", "ERR syntax error", "ERR wrong number of arguments", "NOPERM"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// sentArg is a command's argument that counts how often the client writes
// it (it marshals an encoding.BinaryMarshaler argument each time it writes
// the command: package port): more than once, the command was sent again.
type sentArg struct {
	value string
	sent  atomic.Int32
}

// MarshalBinary is the value, counted.
func (a *sentArg) MarshalBinary() ([]byte, error) {
	a.sent.Add(1)
	return []byte(a.value), nil
}

// plainEnded is the reply the script would have given for a release the
// plain delete did: the lock deleted.
var plainEnded = scripts.Ended{Lease: scripts.LeaseHeld}

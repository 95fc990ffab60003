package lease

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/backoff"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/scripts"
)

// Script is one of package scripts' Lua scripts, ready to run: its source,
// and its SHA1 boxed once, as EVALSHA's argument. It is the one runner of
// the protocol's scripts; package scripts sends nothing.
//
// A read-only script (scripts.Script.ReadOnly) runs flagged no-writes
// (scripts.NoWrites), and unflagged (bare) on a server that refuses to
// compile the flag: Redis before 7.0, miniredis. A Client that remembers
// (port.Remembering) is sent the unflagged one from then on; any other
// tries the flag on each call.
type Script struct {
	src  string
	hash any
	bare *Script
}

// NewScript returns s ready to run.
func NewScript(s *scripts.Script) Script {
	if !s.ReadOnly {
		return script(s.Source)
	}
	bare := script(s.Source)
	flagged := script(s.Flagged())
	flagged.bare = &bare
	return flagged
}

// script is the Script of source src.
func script(src string) Script {
	sum := sha1.Sum([]byte(src))
	return Script{src: src, hash: hex.EncodeToString(sum[:])}
}

// The scripts the engine runs.
var (
	releaseScript       = NewScript(scripts.Release)
	waitScript          = NewScript(scripts.Wait)
	refreshScript       = NewScript(scripts.Refresh)
	pttlScript          = NewScript(scripts.PTTL)
	fencedAcquireScript = NewScript(scripts.FencedAcquire)
	semAcquireScript    = NewScript(scripts.SemAcquire)
	semWaitScript       = NewScript(scripts.SemWait)
	semReleaseScript    = NewScript(scripts.SemRelease)
	semRefreshScript    = NewScript(scripts.SemRefresh)
	semPTTLScript       = NewScript(scripts.SemPTTL)
	inspectScript       = NewScript(scripts.Inspect)
	semInspectScript    = NewScript(scripts.SemInspect)
)

// Arguments of the release script chosen at run time, boxed once: boxing a
// string variable allocates, and these go out with every release.
var matchExact, matchPrefix, shardedChannels, plainChannels, notQueued, isProbe any = "0", "1", "1", "0", "", "1"

// vacant is the release value that goes on serving a queue a release left
// vacant (scripts/wire.go): the empty owner.
var vacant any = ""

// Run runs s with keys and args on c: EVALSHA, and when the server does not
// have the script cached (after a restart or SCRIPT FLUSH) SCRIPT LOAD and
// EVALSHA again, or EVAL where the load fails. It is the one way leasekit
// runs a script.
//
// While the keys' Redis Cluster slot migrates between two masters, Redis
// refuses a script whose keys are split between them with TRYAGAIN, and
// while the nodes disagree on the slot's owner go-redis may give up on MOVED
// or ASK (slotMoving): the script did not run, so Run sends it again, with a
// growing pause, while ctx lasts and for at most migrationWait. A slot with a
// few keys moves in milliseconds; a waiter that still meets the migration
// past that waits on, as through any failure that may pass.
func (s Script) Run(ctx context.Context, c port.Client, keys []any, args ...any) (any, error) {
	var deadline time.Time
	var pause backoff.Backoff
	for {
		reply, err := s.send(ctx, c, keys, args)
		if !slotMoving(err) {
			return reply, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(migrationWait)
			pause = backoff.Backoff{First: 10 * time.Millisecond, Max: 500 * time.Millisecond}
		}
		if time.Now().After(deadline) || !pause.Sleep(ctx, nil) {
			return reply, err
		}
	}
}

// send sends s once (a read-only script unflagged where the server
// refuses the flag: see Script).
func (s Script) send(ctx context.Context, c port.Client, keys, args []any) (any, error) {
	if s.bare == nil {
		return s.sendSource(ctx, c, keys, args)
	}
	var memory *port.Memory
	if r, ok := c.(port.Remembering); ok {
		memory = r.Memory()
	}
	if memory != nil && memory.NoScriptFlags.Load() {
		return s.bare.sendSource(ctx, c, keys, args)
	}
	reply, err := s.sendSource(ctx, c, keys, args)
	if !flagRefused(err) {
		return reply, err
	}
	if memory != nil {
		memory.NoScriptFlags.Store(true)
	}
	return s.bare.sendSource(ctx, c, keys, args)
}

// flagRefused reports whether err is a server's refusal to compile a
// script for its shebang line: "Error compiling script (new function):
// user_script:1: unexpected symbol near '#'" (Redis 6), "... line:1(column:1)
// near '#': syntax error" (miniredis).
func flagRefused(err error) bool {
	var re port.ServerError
	if err == nil || !errors.As(err, &re) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "Error compiling script") && strings.Contains(msg, "near '#'")
}

// sendSource sends s's own source once: EVALSHA; after NOSCRIPT, SCRIPT
// LOAD and EVALSHA again (load), or EVAL where the load fails.
func (s Script) sendSource(ctx context.Context, c port.Client, keys, args []any) (any, error) {
	reply, err := c.Do(ctx, s.evalSHA(keys, args)...)
	if !noScript(err) {
		return reply, err
	}
	switch loadErr := s.load(ctx, c); {
	case loadErr == nil:
		if reply, err = c.Do(ctx, s.evalSHA(keys, args)...); !noScript(err) {
			return reply, err
		}
	case flagRefused(loadErr):
		return nil, loadErr // EVAL would be refused the same
	}
	return c.Do(ctx, s.eval(keys, args)...)
}

// load loads s into the server's script cache with SCRIPT LOAD (in a
// cluster, every master's), and reports whether it did. A script that
// SCRIPT LOAD loaded stays until a flush or a restart, while since Redis
// 7.4 one that EVAL loaded may be evicted, least recently used first, when
// the cache grows: leasekit's rarely run scripts (Inspect's, a Break's)
// would be loaded again and again. A user whom an ACL denies SCRIPT LOAD,
// but not EVAL, gets EVAL instead (the caller sends it).
func (s Script) load(ctx context.Context, c port.Client) error {
	return c.LoadScript(ctx, s.src)
}

// migrationWait bounds how long Run waits for the migration of its keys'
// slot to end.
const migrationWait = 5 * time.Second

// evalSHA is the command that runs s as EVALSHA, with its keys and SHA1
// boxed already, so that only args cost allocations. It is a copy: the
// client keeps the slice, which would make every caller's arguments
// escape.
func (s Script) evalSHA(keys, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.hash, len(keys))
	cmd = append(cmd, keys...)
	return append(cmd, args...)
}

// eval is the command that runs s as EVAL.
func (s Script) eval(keys, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "eval", s.src, len(keys))
	cmd = append(cmd, keys...)
	return append(cmd, args...)
}

func noScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// run runs s on keys with args on the Core's client.
func (c *Core) run(ctx context.Context, s Script, keys []any, args ...any) (any, error) {
	return s.Run(ctx, c.cfg.Conn, keys, args...)
}

// runConfirmed runs s as run does, followed in the same round trip by WAIT
// for the Core's Replicas, at most ReplicaWait, on the node that holds the
// lock (WAIT counts the replicas of the node it runs on, so in a cluster it
// must go, with the script, to the master of the lock's slot). It returns the
// script's reply and how many replicas confirmed it.
func (c *Core) runConfirmed(ctx context.Context, s Script, keys []any, args ...any) (any, int64, error) {
	wait := []any{"WAIT", c.cfg.Replicas, Millis(c.cfg.ReplicaWait)}
	confirm := func(eval bool) (any, int64, error) {
		cmd := s.evalSHA(keys, args)
		if eval {
			cmd = s.eval(keys, args)
		}
		replies := c.cfg.Conn.Pipe(ctx, keys[0].(string), cmd, wait)
		if err := replies[0].Err; err != nil {
			return nil, 0, err
		}
		confirmed, err := port.Int64(replies[1].Val, replies[1].Err)
		if err != nil {
			return nil, 0, fmt.Errorf("WAIT: %w", err)
		}
		return replies[0].Val, confirmed, nil
	}
	reply, confirmed, err := confirm(false)
	if noScript(err) {
		// SCRIPT LOAD on every master, as Run does; EVAL where it fails.
		reply, confirmed, err = confirm(s.load(ctx, c.cfg.Conn) != nil)
		if noScript(err) {
			reply, confirmed, err = confirm(true)
		}
	}
	return reply, confirmed, err
}

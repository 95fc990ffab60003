package lease

import (
	"context"
	"fmt"
	"strings"

	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Script is one of package scripts' Lua scripts, ready to run: its SHA1
// boxed once, as EVALSHA's argument.
type Script struct {
	src  *redis.Script
	hash any
}

// NewScript returns s ready to run.
func NewScript(s *redis.Script) Script { return Script{src: s, hash: s.Hash()} }

// The scripts the engine runs.
var (
	releaseScript       = NewScript(scripts.Release)
	waitScript          = NewScript(scripts.Wait)
	refreshScript       = NewScript(scripts.Refresh)
	pttlScript          = NewScript(scripts.PTTL)
	fencedAcquireScript = NewScript(scripts.FencedAcquire)
)

// Arguments of the release script that are chosen at run time, boxed once:
// converting a string variable to an interface allocates, and these go out
// with every release (each saves an allocation of about 17 per uncontended
// acquire + release).
var matchExact, matchPrefix, shardedChannels, plainChannels any = "0", "1", "1", "0"

// Runner is what runs a script: a client of any kind, or a pipeline.
type Runner interface {
	redis.Scripter
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// Run runs s with keys and args on c: EVALSHA, and EVAL when the server does
// not have the script cached (after a restart or SCRIPT FLUSH), as go-redis's
// Script.Run does. It is the one way leasekit runs a script: the engine's
// (Core.Run, and Core.runConfirmed in a pipeline), the Register's,
// leasetest's.
func (s Script) Run(ctx context.Context, c Runner, keys []any, args ...any) *redis.Cmd {
	reply := s.send(ctx, c, false, keys, args)
	if !noScript(reply.Err()) {
		return reply
	}
	return s.send(ctx, c, true, keys, args)
}

// send sends (or, to a pipeline, queues) s as EVALSHA, with its keys and SHA1
// boxed already, so that only args cost allocations; with eval, as EVAL.
func (s Script) send(ctx context.Context, c Runner, eval bool, keys, args []any) *redis.Cmd {
	if eval {
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.(string)
		}
		// A copy: go-redis keeps the slice, which would make every
		// caller's arguments escape.
		return s.src.Eval(ctx, c, names, append([]any(nil), args...)...)
	}
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.hash, len(keys))
	cmd = append(cmd, keys...)
	return c.Do(ctx, append(cmd, args...)...)
}

func noScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// Run runs s on the first n keys of lk with args.
func (c *Core) Run(ctx context.Context, s Script, lk *Keys, n int, args ...any) *redis.Cmd {
	return s.Run(ctx, c.cfg.Client, lk.keys[:n], args...)
}

// runConfirmed runs s as Run does, followed in the same round trip by WAIT
// for the Core's Replicas, at most ReplicaWait, on the node that holds the
// lock (WAIT counts the replicas of the node it runs on, so in a cluster it
// must go, with the script, to the master of the lock's slot). It returns the
// script's reply and how many replicas confirmed it.
func (c *Core) runConfirmed(ctx context.Context, s Script, lk *Keys, n int, args ...any) (any, int64, error) {
	var node redis.Cmdable = c.cfg.Client
	if cc, ok := c.cfg.Client.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, lk.lock)
		if err != nil {
			return nil, 0, err
		}
		node = master
	}
	reply, confirmed, err := c.confirmed(ctx, node, s, false, lk.keys[:n], args)
	if noScript(err) {
		reply, confirmed, err = c.confirmed(ctx, node, s, true, lk.keys[:n], args)
	}
	return reply, confirmed, err
}

// confirmed sends s (see Script.send) and WAIT in one pipeline on node.
func (c *Core) confirmed(ctx context.Context, node redis.Cmdable, s Script, eval bool, keys, args []any) (any, int64, error) {
	pipe := node.Pipeline()
	reply := s.send(ctx, pipe, eval, keys, args)
	wait := pipe.Do(ctx, "WAIT", c.cfg.Replicas, Millis(c.cfg.ReplicaWait))
	_, _ = pipe.Exec(ctx) // each command's error is read below
	if err := reply.Err(); err != nil {
		return nil, 0, err
	}
	confirmed, err := wait.Int64()
	if err != nil {
		return nil, 0, fmt.Errorf("WAIT: %w", err)
	}
	return reply.Val(), confirmed, nil
}

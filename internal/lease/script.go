package lease

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/backoff"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Script is one of package scripts' Lua scripts, ready to run with
// go-redis: its SHA1 boxed once, as EVALSHA's argument. It is the one
// runner of the protocol's scripts; package scripts sends nothing.
type Script struct {
	src  *redis.Script
	hash any
}

// NewScript returns s ready to run.
func NewScript(s *scripts.Script) Script {
	src := redis.NewScript(s.Source)
	return Script{src: src, hash: src.Hash()}
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

// runner is what runs a script: a client of any kind, or a pipeline.
type runner interface {
	redis.Scripter
	Do(ctx context.Context, args ...any) *redis.Cmd
}

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
func (s Script) Run(ctx context.Context, c runner, keys []any, args ...any) *redis.Cmd {
	var deadline time.Time
	var pause backoff.Backoff
	for {
		reply := s.send(ctx, c, keys, args)
		if !slotMoving(reply.Err()) {
			return reply
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(migrationWait)
			pause = backoff.Backoff{First: 10 * time.Millisecond, Max: 500 * time.Millisecond}
		}
		if time.Now().After(deadline) || !pause.Sleep(ctx, nil) {
			return reply
		}
	}
}

// send sends s once: EVALSHA; after NOSCRIPT, SCRIPT LOAD and EVALSHA
// again (load), or EVAL where the load fails.
func (s Script) send(ctx context.Context, c runner, keys, args []any) *redis.Cmd {
	reply := s.sendSHA(ctx, c, keys, args)
	if !noScript(reply.Err()) {
		return reply
	}
	if s.load(ctx, c) {
		if reply = s.sendSHA(ctx, c, keys, args); !noScript(reply.Err()) {
			return reply
		}
	}
	return s.sendEval(ctx, c, keys, args)
}

// load loads s into the server's script cache with SCRIPT LOAD (in a
// cluster, every master's), and reports whether it did. A script that
// SCRIPT LOAD loaded stays until a flush or a restart, while since Redis
// 7.4 one that EVAL loaded may be evicted, least recently used first, when
// the cache grows: leasekit's rarely run scripts (Inspect's, a Break's)
// would be loaded again and again. A user whom an ACL denies SCRIPT LOAD,
// but not EVAL, gets EVAL instead (the caller sends it).
func (s Script) load(ctx context.Context, c runner) bool {
	return s.src.Load(ctx, c).Err() == nil
}

// migrationWait bounds how long Run waits for the migration of its keys'
// slot to end.
const migrationWait = 5 * time.Second

// sendSHA sends (or, to a pipeline, queues) s as EVALSHA, with its keys and
// SHA1 boxed already, so that only args cost allocations.
func (s Script) sendSHA(ctx context.Context, c runner, keys, args []any) *redis.Cmd {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.hash, len(keys))
	cmd = append(cmd, keys...)
	return c.Do(ctx, append(cmd, args...)...)
}

// sendEval sends (or queues) s as EVAL.
func (s Script) sendEval(ctx context.Context, c runner, keys, args []any) *redis.Cmd {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.(string)
	}
	// A copy: go-redis keeps the slice, which would make every caller's
	// arguments escape.
	return s.src.Eval(ctx, c, names, append([]any(nil), args...)...)
}

func noScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// run runs s on keys with args on the Core's client.
func (c *Core) run(ctx context.Context, s Script, keys []any, args ...any) *redis.Cmd {
	return s.Run(ctx, c.cfg.Client, keys, args...)
}

// runConfirmed runs s as run does, followed in the same round trip by WAIT
// for the Core's Replicas, at most ReplicaWait, on the node that holds the
// lock (WAIT counts the replicas of the node it runs on, so in a cluster it
// must go, with the script, to the master of the lock's slot). It returns the
// script's reply and how many replicas confirmed it.
func (c *Core) runConfirmed(ctx context.Context, s Script, keys []any, args ...any) (any, int64, error) {
	var node redis.Cmdable = c.cfg.Client
	if cc, ok := c.cfg.Client.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, keys[0].(string))
		if err != nil {
			return nil, 0, err
		}
		node = master
	}
	confirm := func(eval bool) (any, int64, error) {
		pipe := node.Pipeline()
		var reply *redis.Cmd
		if eval {
			reply = s.sendEval(ctx, pipe, keys, args)
		} else {
			reply = s.sendSHA(ctx, pipe, keys, args)
		}
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
	reply, confirmed, err := confirm(false)
	if noScript(err) {
		// SCRIPT LOAD on every master, as Run does; EVAL where it fails.
		reply, confirmed, err = confirm(!s.load(ctx, c.cfg.Client))
		if noScript(err) {
			reply, confirmed, err = confirm(true)
		}
	}
	return reply, confirmed, err
}

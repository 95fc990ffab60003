package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentCounter is a go-redis hook that counts the commands a client sends, by
// name, and its round trips (one per command, one per pipeline). A script
// that the server answers NOSCRIPT counts twice, as it costs (EVALSHA, then
// EVAL). Pub/sub connections bypass hooks: the SUBSCRIBE of a leasekit
// waiter is not counted here (the server counts it).
type sentCounter struct {
	trips atomic.Int64
	names sync.Map // command name -> *atomic.Int64
	// firsts makes the hooks record a contender's first command (see
	// noteFirst); set before the client is used.
	firsts bool
}

func newSentCounter() *sentCounter { return &sentCounter{} }

func (s *sentCounter) add(name string, n int64) {
	c, ok := s.names.Load(name)
	if !ok {
		c, _ = s.names.LoadOrStore(name, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(n)
}

// counts is a copy of the counts by name.
func (s *sentCounter) counts() map[string]int64 {
	out := make(map[string]int64)
	s.names.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// since is the counts by name since before, a copy of counts.
func (s *sentCounter) since(before map[string]int64) map[string]int64 {
	sent := s.counts()
	for name, n := range before {
		sent[name] -= n
	}
	return sent
}

func (s *sentCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (s *sentCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.trips.Add(1)
		s.add(cmd.Name(), 1)
		if s.firsts {
			noteFirst(ctx, func() []string { return goRedisArgs(cmd) })
		}
		return next(ctx, cmd)
	}
}

func (s *sentCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.trips.Add(1)
		for _, c := range cmds {
			s.add(c.Name(), 1)
		}
		if s.firsts && len(cmds) > 0 {
			noteFirst(ctx, func() []string { return goRedisArgs(cmds[0]) })
		}
		return next(ctx, cmds)
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// costSnap is what the cost measures read before and after the ops they
// measure.
type costSnap struct {
	cpu    time.Duration
	server map[string]cmdStat // nil without commandstats
	sent   map[string]int64
}

func (b *bench) costSnap(ctx context.Context) costSnap {
	server, err := b.target.commandStats(ctx)
	if err != nil {
		b.note("note: INFO commandstats failed, so server costs are missing: " + err.Error())
		server = nil
	}
	return costSnap{cpu: processCPU(), server: server, sent: b.target.sent.counts()}
}

// cost is what ops cost between two snapshots, per op.
type cost struct {
	clientCPU   float64  // process CPU, ns per op
	serverUsec  *float64 // top-level command time, µs per op; nil without commandstats
	serverCalls *float64 // commands run, script-internal ones included, per op
}

// costOf turns two snapshots into per-op costs. sent adds the commands that
// clients outside this process (convoy-procs workers) sent meanwhile.
func costOf(before, after costSnap, ops int, sent map[string]int64) cost {
	c := cost{clientCPU: float64(after.cpu-before.cpu) / float64(max(ops, 1))}
	if before.server == nil || after.server == nil {
		return c
	}
	delta := make(map[string]cmdStat)
	for name, s := range after.server {
		p := before.server[name]
		delta[name] = cmdStat{s.calls - p.calls, s.usec - p.usec}
	}
	bySent := make(map[string]int64)
	for name, n := range after.sent {
		bySent[name] = n - before.sent[name]
	}
	for name, n := range sent {
		bySent[name] += n
	}
	usec, calls := serverTime(delta, bySent)
	usec, calls = usec/float64(max(ops, 1)), calls/float64(max(ops, 1))
	c.serverUsec, c.serverCalls = &usec, &calls
	return c
}

// serverTime sums the commandstats delta into the server time of the
// commands clients sent, and the calls of every command run.
//
// Redis counts a command that a script runs in that command's own line, and
// counts its time again in the script's: summing every line would count a
// script's inner commands twice. So a script command's time counts whole,
// and a plain command's only for the share of its calls that clients sent
// (the hooks count those; the rest ran inside scripts). Pub/sub and
// connection commands never run in scripts and count whole. The calls count
// every command run, script-internal ones included. INFO, which this bench
// sends to read the stats, counts in neither.
func serverTime(delta map[string]cmdStat, sent map[string]int64) (usec, calls float64) {
	for name, s := range delta {
		base, _, _ := strings.Cut(name, "|")
		if base == "info" || s.calls <= 0 {
			continue
		}
		calls += float64(s.calls)
		share := 1.0
		if !scriptCommand[base] && !neverScripted[base] {
			share = min(1, float64(sent[base])/float64(s.calls))
		}
		usec += share * float64(s.usec)
	}
	return usec, calls
}

var scriptCommand = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

var neverScripted = map[string]bool{
	"subscribe": true, "unsubscribe": true, "psubscribe": true, "punsubscribe": true,
	"ssubscribe": true, "sunsubscribe": true, "ping": true, "hello": true, "client": true,
	"cluster": true, "readonly": true, "script": true, "auth": true, "select": true,
}

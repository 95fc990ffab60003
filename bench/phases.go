package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The phases of a worker process's first acquisition (bench/README.md): in a
// convoy-procs worker of a library that queues (leasekit's), the client's
// hooks stamp the commands of the first contender's acquisition, found by
// its context (every command but a connection's handshake), and every
// connection the worker dials, whose writes and reads show when its
// handshake ended and, on a subscription connection, when the server
// confirmed the SUBSCRIBE. Pub/sub commands bypass go-redis's command hooks,
// so the connection is where a subscription can be seen; and go-redis dials
// a pooled connection on a goroutine of its own, with a context of its own,
// and hands it to whichever command waits first, so the probe's connection
// is the one whose first command was the probe (its arguments hold an owner
// id), and the subscription's the first one dialled after the arrival.

// phaseKey carries a contender's *phaseLog in the context of its acquisition.
type phaseKey struct{}

// phaseLog is what the hooks saw of one acquisition: its commands.
type phaseLog struct {
	mu   sync.Mutex
	cmds []stampedCmd
}

// stampedCmd is a command of the acquisition, from its call to its reply.
type stampedCmd struct {
	name       string
	args       []string
	start, end time.Time
}

func withPhaseLog(ctx context.Context) (context.Context, *phaseLog) {
	l := &phaseLog{}
	return context.WithValue(ctx, phaseKey{}, l), l
}

func phaseLogOf(ctx context.Context) *phaseLog {
	l, _ := ctx.Value(phaseKey{}).(*phaseLog)
	return l
}

// handshakeCommands are what go-redis sends on a new connection before the
// command that needed it.
var handshakeCommands = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "readonly": true}

// phaseHook stamps every connection its client dials, and the commands of
// acquisitions whose context carries a phaseLog.
type phaseHook struct {
	mu    sync.Mutex
	conns []*stampedConn
}

func (h *phaseHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		start := time.Now()
		c, err := next(ctx, network, addr)
		if err != nil {
			return c, err
		}
		sc := &stampedConn{Conn: c, dialStart: start}
		h.mu.Lock()
		h.conns = append(h.conns, sc)
		h.mu.Unlock()
		return sc, nil
	}
}

func (*phaseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l := phaseLogOf(ctx)
		if l == nil || handshakeCommands[cmd.Name()] {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		l.mu.Lock()
		l.cmds = append(l.cmds, stampedCmd{cmd.Name(), goRedisArgs(cmd), start, time.Now()})
		l.mu.Unlock()
		return err
	}
}

func (*phaseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l := phaseLogOf(ctx)
		if l == nil || len(cmds) == 0 || handshakeCommands[cmds[0].Name()] {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		l.mu.Lock()
		l.cmds = append(l.cmds, stampedCmd{cmds[0].Name(), goRedisArgs(cmds[0]), start, time.Now()})
		l.mu.Unlock()
		return err
	}
}

// stampedConn is a connection that stamps when its dial started, the write of
// its first command after the handshake, and for a SUBSCRIBE, the read that
// brought the server's confirmation.
type stampedConn struct {
	net.Conn
	dialStart time.Time

	mu        sync.Mutex
	first     string    // the name of the first command written after the handshake
	written   []byte    // what that write held, at most maxWritten bytes
	firstAt   time.Time // when it was written
	confirmed time.Time // a SUBSCRIBE's: the first read after it
}

// maxWritten bounds what a stampedConn keeps of its first command: enough for
// a probe's arguments.
const maxWritten = 1024

func (c *stampedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.first == "" {
		if name := commandName(p); name != "" && !handshakeCommands[name] {
			c.first, c.firstAt = name, time.Now()
			c.written = bytes.Clone(p[:min(len(p), maxWritten)])
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *stampedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.subscription() && c.confirmed.IsZero() {
			c.confirmed = time.Now()
		}
		c.mu.Unlock()
	}
	return n, err
}

// SyscallConn keeps go-redis's health check of an idle connection, which
// needs the raw socket.
func (c *stampedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, syscall.EINVAL
}

// wrote reports whether the connection's first command holds every one of
// args. Called with c.mu held.
func (c *stampedConn) wrote(args []string) bool {
	for _, a := range args {
		if !bytes.Contains(c.written, []byte(a)) {
			return false
		}
	}
	return len(args) > 0
}

// subscription reports whether the connection's first command was a
// SUBSCRIBE. Called with c.mu held.
func (c *stampedConn) subscription() bool { return c.first == "subscribe" || c.first == "ssubscribe" }

// commandName reads the name of the first command in p, a RESP array of
// bulk strings as go-redis writes it ("*2\r\n$9\r\nsubscribe\r\n..."),
// lowercased; "" if p does not start with one.
func commandName(p []byte) string {
	if len(p) == 0 || p[0] != '*' {
		return ""
	}
	_, rest, ok := bytes.Cut(p, []byte("\r\n$"))
	if !ok {
		return ""
	}
	size, rest, ok := bytes.Cut(rest, []byte("\r\n"))
	n, err := strconv.Atoi(string(size))
	if !ok || err != nil || n > len(rest) {
		return ""
	}
	return string(bytes.ToLower(rest[:n]))
}

// span is a phase, in ns from the contender's arrival; absent (both 0) when
// it did not happen.
type span struct {
	Start int64 `json:"start_ns"`
	End   int64 `json:"end_ns"`
}

// firstAcquire is a worker's first acquisition, by phase (bench/README.md).
type firstAcquire struct {
	// Dial is the first attempt's call until its write: its connection's
	// dial and handshake, and the client's work before them; absent when a
	// connection was open already.
	Dial span `json:"dial"`
	// Attempt is the first attempt (leasekit's probe), from its write (or
	// its call, without a dial) to its reply.
	Attempt span `json:"attempt"`
	// Subscribe is the subscription connection's dial, handshake and
	// SUBSCRIBE, until the server's confirmation; absent when the Locker
	// was subscribed already.
	Subscribe span `json:"subscribe"`
	// Queue is the attempt that queues the waiter (the second command).
	Queue span `json:"queue"`
}

// phases turns what l and h saw into the phases of an acquisition that
// arrived at arrival.
func (h *phaseHook) phases(l *phaseLog, arrival time.Time) firstAcquire {
	h.mu.Lock()
	defer h.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	at := func(t time.Time) int64 { return max(t.Sub(arrival).Nanoseconds(), 1) }
	slices.SortFunc(l.cmds, func(a, b stampedCmd) int { return a.start.Compare(b.start) })
	var f firstAcquire
	if len(l.cmds) == 0 {
		return f
	}
	probe := l.cmds[0]
	f.Attempt = span{at(probe.start), at(probe.end)}
	queued := l.cmds[len(l.cmds)-1].start // the queueing attempt's, or the probe's
	for _, c := range h.conns {
		if c.dialStart.Before(arrival) || c.dialStart.After(queued) {
			continue
		}
		c.mu.Lock()
		switch {
		case c.subscription() && f.Subscribe.End == 0 && !c.confirmed.IsZero():
			f.Subscribe = span{at(c.dialStart), at(c.confirmed)}
		case !c.subscription() && f.Dial.End == 0 && c.wrote(probe.args):
			// The probe's connection: dialled in its call, before its write.
			f.Dial = span{at(probe.start), at(c.firstAt)}
			f.Attempt.Start = f.Dial.End
		}
		c.mu.Unlock()
	}
	if len(l.cmds) > 1 {
		f.Queue = span{at(l.cmds[1].start), at(l.cmds[1].end)}
	}
	return f
}

// phaseResult pools the first acquisitions of one library's workers, with
// the handoffs that granted them and, apart, every other handoff.
type phaseResult struct {
	dial, attempt, subscribe, queue [2]samples // starts, ends
	missing                         [4]int     // acquisitions without the phase
	firstHandoffs, otherHandoffs    samples
	n                               int
}

func (r *phaseResult) add(f firstAcquire) {
	r.n++
	for i, p := range []struct {
		s  span
		to *[2]samples
	}{{f.Dial, &r.dial}, {f.Attempt, &r.attempt}, {f.Subscribe, &r.subscribe}, {f.Queue, &r.queue}} {
		if p.s.End == 0 {
			r.missing[i]++
			continue
		}
		p.to[0] = append(p.to[0], time.Duration(p.s.Start))
		p.to[1] = append(p.to[1], time.Duration(p.s.End))
	}
}

// phaseSpan is one phase in a row: its start and end, p50 over the
// acquisitions that had it, in ns from the arrival.
type phaseSpan struct {
	Name  string `json:"name"`
	Start int64  `json:"start_ns"`
	End   int64  `json:"end_ns"`
	// Of is how many of the acquisitions had the phase.
	Of int `json:"of"`
}

// phaseNames name the phases in the order of firstAcquire's fields.
var phaseNames = [...]string{"dial", "first attempt", "subscribe", "queue"}

func (r *phaseResult) row(lib string, p int, cold bool, b *bench) row {
	out := row{Scenario: firstAcquireScenario, Lib: lib, Procs: p, Cold: cold, N: r.n,
		HandoffP50: int64(r.firstHandoffs.p50()), P50: int64(r.otherHandoffs.p50())}
	for i, s := range []*[2]samples{&r.dial, &r.attempt, &r.subscribe, &r.queue} {
		out.Phases = append(out.Phases, phaseSpan{phaseNames[i], int64(s[0].p50()), int64(s[1].p50()), r.n - r.missing[i]})
	}
	out.Ratio = ratio(r.queue[1].p50(), b.ping)
	out.RatioTo = "PING"
	return out
}

// firstAcquireScenario names the rows of the phases, printed as a table of
// their own after convoy-procs.
const firstAcquireScenario = "convoy-procs first acquire"

// firstAcquireColumns are that table's.
func firstAcquireColumns() []column {
	phase := func(i int) column {
		return column{phaseNames[i], func(r row) string {
			if i >= len(r.Phases) || r.Phases[i].Of == 0 {
				return "-"
			}
			s := r.Phases[i]
			return fmt.Sprintf("%s–%s", fmtMicros(s.Start), fmtMicros(s.End))
		}}
	}
	return []column{libColumn, procsColumn, startColumn,
		{"procs", func(r row) string { return fmt.Sprint(r.N) }},
		phase(0), phase(1), phase(2), phase(3),
		{"queued ÷ PING", func(r row) string { return fmt.Sprintf("%.1f", r.Ratio) }},
		{"its handoff", func(r row) string { return fmtDur(time.Duration(r.HandoffP50)) }},
		{"other handoffs", func(r row) string { return fmtDur(time.Duration(r.P50)) }}}
}

// fmtMicros prints ns as whole µs.
func fmtMicros(ns int64) string { return strconv.FormatInt((ns+500)/1000, 10) }

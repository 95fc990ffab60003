package redistest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Counter is a go-redis hook that counts the round trips a client makes, by
// operation: a script is named after its .lua file ("acquire", "release", ...),
// any other command by its lowercase name, and an EVALSHA the server answered
// NOSCRIPT (go-redis then sends EVAL) as "noscript". The efficiency acquire
// (SET NX, alone or pipelined with PTTL) is "acquire". Another pipeline counts
// once, as "pipeline". The handshake of a new connection (HELLO, CLIENT
// SETINFO) is counted as "handshake" and left out of Total. Commands on pub/sub
// connections do not pass through hooks.
type Counter struct {
	mu      sync.Mutex
	counts  map[string]int
	total   int
	changed chan struct{}
}

// Count installs a Counter on client (a *redis.Client or *redis.ClusterClient).
func Count(client interface{ AddHook(redis.Hook) }) *Counter {
	h := &Counter{counts: make(map[string]int), changed: make(chan struct{})}
	client.AddHook(h)
	return h
}

// scriptNames are the names of leasekit's scripts by SHA1.
var scriptNames = func() map[string]string {
	m := make(map[string]string, len(scripts.All))
	for _, s := range scripts.All {
		m[s.Hash()] = s.Name
		if s.ReadOnly { // run flagged where the server takes flags
			m[redis.NewScript(s.Flagged()).Hash()] = s.Name
		}
	}
	// The plain path's equivalents of SET IFEQ and DELEX are a refresh and
	// a release, as those commands are (opName).
	m[scripts.ExpireIfEq.Hash()], m[scripts.DelIfEq.Hash()] = "refresh", "release"
	return m
}()

func opName(cmd redis.Cmder) string {
	name := strings.ToLower(cmd.Name())
	args := cmd.Args()
	switch name {
	case "set":
		for _, a := range args[3:] {
			if s, ok := a.(string); ok && strings.EqualFold(s, "nx") {
				return "acquire"
			}
			if s, ok := a.(string); ok && strings.EqualFold(s, "ifeq") {
				return "refresh" // the plain path's (internal/lease's plain.go)
			}
		}
	case "delex", "delifeq":
		return "release" // the plain path's
	case "evalsha", "evalsha_ro":
		if len(args) > 1 {
			if s, ok := args[1].(string); ok && scriptNames[s] != "" {
				return scriptNames[s]
			}
		}
	case "eval", "eval_ro":
		if len(args) > 1 {
			if s, ok := args[1].(string); ok {
				if n := scriptNames[redis.NewScript(s).Hash()]; n != "" {
					return n
				}
			}
		}
	}
	return name
}

// handshake reports whether a pipeline is a new connection's setup.
func handshake(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		switch strings.ToLower(c.Name()) {
		case "hello", "auth", "select", "client", "readonly":
		default:
			return false
		}
	}
	return true
}

func (h *Counter) record(name string) {
	h.mu.Lock()
	h.counts[name]++
	if name != "handshake" {
		h.total++
	}
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

// DialHook passes dials through.
func (h *Counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook counts one round trip per command.
func (h *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		switch name := opName(cmd); {
		case err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT"):
			h.record("noscript")
		case name == "hello" || name == "auth" || name == "select":
			h.record("handshake")
		default:
			h.record(name)
		}
		return err
	}
}

// ProcessPipelineHook counts one round trip per pipeline.
func (h *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		switch {
		case handshake(cmds):
			h.record("handshake")
		case len(cmds) > 0 && opName(cmds[0]) == "acquire":
			h.record("acquire") // the waiter's SET NX + PTTL
		default:
			h.record("pipeline")
		}
		return err
	}
}

// Of returns how many round trips of the named operation were counted.
func (h *Counter) Of(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[name]
}

// Total returns how many round trips were counted, handshakes left out.
func (h *Counter) Total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Reset sets every count to zero.
func (h *Counter) Reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.counts)
	h.total = 0
}

// Await blocks until the named operation has been counted at least n times,
// failing the test after 30 seconds: a bound for a hung test, not a timing
// assertion.
func (h *Counter) Await(t testing.TB, name string, n int) {
	t.Helper()
	h.await(t, name, n, func() int { return h.counts[name] })
}

// AwaitTotal blocks until n round trips have been counted, of any operation,
// failing the test after 30 seconds.
func (h *Counter) AwaitTotal(t testing.TB, n int) {
	t.Helper()
	h.await(t, "", n, func() int { return h.total })
}

// await blocks until count (called with h.mu held) reaches n.
func (h *Counter) await(t testing.TB, name string, n int, count func() int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		got, changed := count(), h.changed
		h.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("waited 30s for %d %q round trips, saw %d", n, name, got)
		}
	}
}

// Calls is how many times the server of c has run command (lowercase, as
// INFO commandstats names it: "set", "ping"), in scripts too; 0 if never.
func Calls(t testing.TB, c *redis.Client, command string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("redistest: INFO commandstats: %v", err)
	}
	_, after, found := strings.Cut(info, "cmdstat_"+command+":calls=")
	if !found {
		return 0
	}
	digits, _, _ := strings.Cut(after, ",")
	n, err := strconv.Atoi(digits)
	if err != nil {
		t.Fatalf("redistest: INFO commandstats: cmdstat_%s:calls=%s: %v", command, digits, err)
	}
	return n
}

// goScripts are the go-redis scripts of Script, by name.
var goScripts sync.Map

// Script is s as a go-redis script, for tests that send one of leasekit's
// scripts themselves (leasekit's packages send them with internal/lease's
// runner).
func Script(s *scripts.Script) *redis.Script {
	if r, ok := goScripts.Load(s.Name); ok {
		return r.(*redis.Script)
	}
	r, _ := goScripts.LoadOrStore(s.Name, redis.NewScript(s.Source))
	return r.(*redis.Script)
}

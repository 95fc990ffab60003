package lease

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/luaheader"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// TestScriptsGetTheArgvTheirHeadersList runs every operation of the engine
// on each kind of lock and a semaphore, records how many ARGV each script
// is sent, and holds that against the ARGV its header lists: never more,
// never fewer than the last one not marked optional (or absent), and the
// most the header lists sent at least once.
func TestScriptsGetTheArgvTheirHeadersList(t *testing.T) {
	b := redistest.Mini(t)
	rec := &argvRecorder{sent: make(map[string][]int64)}
	b.Client.AddHook(rec)
	count := redistest.Count(b.Client)
	for _, cfg := range []Config{
		{Kind: "efficiency"},
		{Kind: "correctness", Fenced: true, ClockFloor: true, ExpiringCounter: true},
		{Kind: "correctness", Fenced: true, ClockFloor: true, Tokens: drawn()},
	} {
		exerciseLock(t, b, count, cfg)
	}
	exerciseSemaphore(t, b, count)
	for name, s := range engineScripts {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("..", "..", "scripts", name+".lua"))
			if err != nil {
				t.Fatal(err)
			}
			most, least := argvListed(luaheader.Header(string(src)))
			sent := luaheader.Distinct(rec.of(s))
			switch {
			case len(sent) == 0:
				t.Fatal("never run")
			case sent[0] < least || sent[len(sent)-1] != most:
				t.Errorf("sent %v ARGV; the header lists %d, the first %d required", sent, most, least)
			}
		})
	}
}

// drawn is a token source in memory: 1, 2, 3 and on.
func drawn() Tokens {
	var mu sync.Mutex
	var n uint64
	return func(context.Context, string, uint64) (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return n, nil
	}
}

// engineScripts are the scripts the engine runs, by file name.
var engineScripts = map[string]Script{
	"release": releaseScript, "wait": waitScript, "refresh": refreshScript, "pttl": pttlScript,
	"fenced_acquire": fencedAcquireScript, "inspect": inspectScript,
	"sem_acquire": semAcquireScript, "sem_wait": semWaitScript, "sem_release": semReleaseScript,
	"sem_refresh": semRefreshScript, "sem_pttl": semPTTLScript, "sem_inspect": semInspectScript,
}

// argvLine is a header's line that names an ARGV.
var argvLine = regexp.MustCompile(`^-- ARGV\[([0-9]+)\]`)

// argvListed reads the ARGV a script's header lists: the highest index, and
// the highest not marked optional or absent.
func argvListed(header []string) (most, least int64) {
	for _, line := range header {
		m := argvLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		most = max(most, n)
		if !strings.Contains(line, "optional") && !strings.Contains(line, "absent") {
			least = max(least, n)
		}
	}
	return most, least
}

// exerciseLock runs every operation on a lock of a Core configured as cfg:
// a lone acquire, refresh, ttl, inspect, a handoff to a waiter, a waiter
// that gives up, a lone acquire that settles a lapsed lease, and a break.
func exerciseLock(t *testing.T, b *redistest.Backend, count *redistest.Counter, cfg Config) {
	ctx := t.Context()
	name := "argv-" + cfg.Kind
	core := func() *Core { return argvCore(t, b, cfg) }
	owner, waiter, quitter := core(), core(), core()
	h := mustHeld(t)(owner.Try(ctx, name, time.Minute))
	exerciseHeld(t, h)
	if _, err := owner.Inspect(ctx, name); err != nil {
		t.Fatal(err)
	}
	handed := handOver(t, count, "wait", h, func() (*Held, error) { return waiter.Obtain(ctx, name, time.Minute) })
	giveUp(t, count, "wait", func(ctx context.Context) (*Held, error) { return quitter.Obtain(ctx, name, time.Minute) })
	b.Advance(time.Minute) // the handed lease lapses, its key kept for the queue
	settled := mustHeld(t)(owner.Try(ctx, name, time.Minute))
	_ = handed.Release(ctx) // lapsed: not held
	if _, err := owner.Break(ctx, name, ""); err != nil {
		t.Fatal(err)
	}
	_ = settled.Release(ctx) // broken: not held
}

// exerciseSemaphore runs every operation on a semaphore of one permit: a
// lone acquire, refresh, ttl, inspect, a handoff and a waiter that gives
// up.
func exerciseSemaphore(t *testing.T, b *redistest.Backend, count *redistest.Counter) {
	ctx := t.Context()
	cfg := Config{Kind: "efficiency"}
	owner, waiter, quitter := argvCore(t, b, cfg), argvCore(t, b, cfg), argvCore(t, b, cfg)
	s := owner.Semaphore("argv", 1)
	h := mustHeld(t)(s.Try(ctx, time.Minute))
	exerciseHeld(t, h)
	if _, err := s.Inspect(ctx); err != nil {
		t.Fatal(err)
	}
	handed := handOver(t, count, "sem_wait", h, func() (*Held, error) { return waiter.Semaphore("argv", 1).Obtain(ctx, time.Minute) })
	giveUp(t, count, "sem_wait", func(ctx context.Context) (*Held, error) { return quitter.Semaphore("argv", 1).Obtain(ctx, time.Minute) })
	if err := handed.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// exerciseHeld refreshes h and reads its ttl.
func exerciseHeld(t *testing.T, h *Held) {
	t.Helper()
	if err := h.Refresh(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := h.TTL(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// handOver starts obtain, waits until its wait script has run (named
// script, as count names it), releases h, and returns what obtain was
// handed.
func handOver(t *testing.T, count *redistest.Counter, script string, h *Held, obtain func() (*Held, error)) *Held {
	t.Helper()
	type result struct {
		h   *Held
		err error
	}
	done := make(chan result)
	attempts := count.Of(script)
	go func() {
		h, err := obtain()
		done <- result{h, err}
	}()
	count.Await(t, script, attempts+1)
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-done
	return mustHeld(t)(r.h, r.err)
}

// giveUp starts obtain, waits until its wait script has run, and ends its
// context: the waiter leaves the queue.
func giveUp(t *testing.T, count *redistest.Counter, script string, obtain func(context.Context) (*Held, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	attempts := count.Of(script)
	go func() {
		_, err := obtain(ctx)
		done <- err
	}()
	count.Await(t, script, attempts+1)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a waiter whose context ended: got the lease")
	}
}

// mustHeld fails the test on an acquire's error.
func mustHeld(t *testing.T) func(*Held, error) *Held {
	return func(h *Held, err error) *Held {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
}

// argvCore is a Core configured as cfg on b, closed when the test ends.
func argvCore(t *testing.T, b *redistest.Backend, cfg Config) *Core {
	cfg.Client, cfg.Prefix, cfg.DriftFactor = b.Client, "argv:", DefaultDriftFactor
	cfg.Errors = Errors{NotObtained: errArgv, NotHeld: errArgv, LockLost: errArgv, Late: errArgv, Closed: errArgv}
	c := New(cfg)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var errArgv = errors.New("argv test")

// argvRecorder is a go-redis hook that records how many ARGV each script
// run through it was sent.
type argvRecorder struct {
	mu   sync.Mutex
	sent map[string][]int64 // by SHA1
}

func (r *argvRecorder) of(s Script) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent := r.sent[s.hash.(string)]
	if s.bare != nil { // a read-only script, run unflagged on miniredis
		sent = append(slices.Clone(sent), r.sent[s.bare.hash.(string)]...)
	}
	return sent
}

func (r *argvRecorder) record(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 {
		return
	}
	var hash string
	switch name := strings.ToLower(cmd.Name()); name {
	case "evalsha":
		hash, _ = args[1].(string)
	case "eval":
		src, _ := args[1].(string)
		hash = redis.NewScript(src).Hash()
	default:
		return
	}
	keys, _ := args[2].(int)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent[hash] = append(r.sent[hash], int64(len(args)-3-keys))
}

func (r *argvRecorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *argvRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *argvRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			r.record(cmd)
		}
		return next(ctx, cmds)
	}
}

// TestPxArgBoxesATTLOnce: SET NX's PX argument is the ttl in ms, whatever
// ttl came before, and a ttl asked for again is not boxed again (a boxed
// integer of 256 or more is an allocation on every grant).
func TestPxArgBoxesATTLOnce(t *testing.T) {
	c := &Core{}
	for _, ttl := range []time.Duration{time.Minute, 1500 * time.Millisecond, time.Minute, 10 * time.Second, time.Microsecond} {
		if got, want := c.pxArg(ttl), Millis(ttl); got != want {
			t.Errorf("pxArg(%v) = %v, want %d", ttl, got, want)
		}
	}
	c.pxArg(time.Minute)
	if n := testing.AllocsPerRun(100, func() { _ = c.pxArg(time.Minute) }); n != 0 {
		t.Errorf("pxArg of the ttl last asked for: %v allocations, want 0", n)
	}
}

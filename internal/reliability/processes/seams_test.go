package processes_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// quiet discards a seams child's logs: its warnings of failed refreshes,
// retried, are the faults the test injects.
var quiet = slog.New(slog.DiscardHandler)

// seamHolds is how many holds each of a seams child's two goroutines makes.
const seamHolds = 4

// seamCommands are the commands whose replies TestSeams loses, by what
// they are: each matches a request chunk that carries one.
var seamCommands = map[string]func([]byte) bool{
	"SET NX": func(c []byte) bool {
		c = bytes.ToLower(c)
		return bytes.Contains(c, []byte("\r\nset\r\n")) && bytes.Contains(c, []byte("\r\nnx\r\n"))
	},
	"fenced acquire": scriptRequest(scripts.FencedAcquire),
	"wait":           scriptRequest(scripts.Wait),
	"refresh":        anyOf(scriptRequest(scripts.Refresh), plainRequest("ifeq"), scriptRequest(scripts.ExpireIfEq)),
	"release":        anyOf(scriptRequest(scripts.Release), plainRequest("delex"), plainRequest("delifeq"), scriptRequest(scripts.DelIfEq)),
	"permit acquire": scriptRequest(scripts.SemAcquire),
	"permit wait":    scriptRequest(scripts.SemWait),
	"permit refresh": scriptRequest(scripts.SemRefresh),
	"permit release": scriptRequest(scripts.SemRelease),
	"SUBSCRIBE":      func(c []byte) bool { return bytes.Contains(bytes.ToLower(c), []byte("subscribe\r\n")) },
}

// seamKinds are the kinds TestSeams holds, and the commands each sends.
var seamKinds = []struct {
	kind     string
	commands []string
}{
	{"efficiency", []string{"SET NX", "wait", "refresh", "release", "SUBSCRIBE"}},
	{"correctness", []string{"fenced acquire", "wait", "refresh", "release", "SUBSCRIBE"}},
	{"semaphore", []string{"permit acquire", "permit wait", "permit refresh", "permit release", "SUBSCRIBE"}},
}

// plainRequest matches a request chunk that carries word, a plain command's
// name or option (the plain path of internal/lease's plain.go: SET IFEQ,
// DELEX, DELIFEQ; where the server has none, their scripts).
func plainRequest(word string) func([]byte) bool {
	w := []byte("\r\n" + word + "\r\n")
	return func(c []byte) bool { return bytes.Contains(bytes.ToLower(c), w) }
}

// anyOf matches a chunk any of ms matches.
func anyOf(ms ...func([]byte) bool) func([]byte) bool {
	return func(c []byte) bool {
		for _, m := range ms {
			if m(c) {
				return true
			}
		}
		return false
	}
}

// scriptRequest matches a request chunk that runs s.
func scriptRequest(s *scripts.Script) func([]byte) bool {
	hash := []byte("\r\n" + s.Hash() + "\r\n")
	return func(c []byte) bool { return bytes.Contains(c, hash) }
}

// TestSeams: three holder processes of one lock (a semaphore of one
// permit), two goroutines each, hold it in Do over and over through a proxy
// that loses the reply of a command of every kind they send, one after
// another (go-redis sends each again on a fresh connection), and every few
// seconds half-opens their subscription connections (the server side
// closed, the client side silent, as a NAT that dropped the flow). No two
// holders run at once (a counter on the server, outside the proxy, says
// so), no Do reports an error (nothing was really lost: every report of a
// lost lease would be false), and every waiter is served.
func TestSeams(t *testing.T) {
	for _, k := range seamKinds {
		t.Run(k.kind, func(t *testing.T) { testSeams(t, k.kind, k.commands) })
	}
}

func testSeams(t *testing.T, kind string, commands []string) {
	srv := redistest.Start(t)
	direct := srv.Client(t)
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	const name, children = "seams", 3
	var lines []<-chan string
	for range children {
		c := proc.Start(t, "seams", fmt.Sprintf("LEASEKIT_SEAMS=%s %s %s %s", p.Addr(), srv.Addr, kind, name))
		lines = append(lines, c.Lines())
	}
	cuts := make(map[string]*atomic.Int64) // replies lost
	lost := make(map[string]*atomic.Int64) // when the last was, ns
	for _, c := range commands {
		cuts[c], lost[c] = new(atomic.Int64), new(atomic.Int64)
	}
	stop := make(chan struct{})
	var faults sync.WaitGroup
	halfOpened, resubscribing := 0, false
	armed := "" // the kind not yet cut that the proxy waits for
	uncut := func() []string {
		var pending []string
		for _, c := range commands {
			if cuts[c].Load() == 0 {
				pending = append(pending, c)
			}
		}
		return pending
	}
	faults.Go(func() {
		next := time.Now().Add(time.Second)
		for {
			select {
			case <-stop:
				p.CutAfterRequest(nil)
				return
			case <-time.After(20 * time.Millisecond):
			}
			// One lost reply armed at a time, each kind of command in turn
			// at random; after a half-open, the SUBSCRIBE that replaces the
			// connection until one has lost its reply.
			// A kind whose reply was lost rests for a second: go-redis
			// sends a command at most four times, and losing every reply
			// would be a failure of the network, which Do reports.
			// A kind not yet cut stays armed until it is: a run is a few
			// seconds, and left to chance one kind can be missed.
			c := commands[rand.IntN(len(commands))]
			if armed == "" || cuts[armed].Load() > 0 {
				armed = ""
				if pending := uncut(); len(pending) > 0 {
					armed = pending[rand.IntN(len(pending))]
				}
			}
			if armed != "" {
				c = armed
			}
			if resubscribing && cuts["SUBSCRIBE"].Load() == 0 {
				c = "SUBSCRIBE"
			}
			match, n, last := seamCommands[c], cuts[c], lost[c]
			if time.Since(time.Unix(0, last.Load())) < time.Second {
				p.CutAfterRequest(nil)
				continue
			}
			p.CutAfterRequest(func(chunk []byte) bool {
				if !match(chunk) {
					return false
				}
				n.Add(1)
				last.Store(time.Now().UnixNano())
				return true
			})
			if time.Now().After(next) {
				p.HalfOpenSubscriptions()
				halfOpened, resubscribing = halfOpened+1, true
				next = time.Now().Add(3 * time.Second)
			}
		}
	})
	served, failures := 0, 0
	for i, ch := range lines {
		for line := range ch {
			switch {
			case strings.HasPrefix(line, "served "):
				n, _ := strconv.Atoi(strings.TrimPrefix(line, "served "))
				served += n
			case failures < 10:
				t.Errorf("holder %d: %s", i, line)
				failures++
			}
		}
	}
	close(stop)
	faults.Wait()
	var got []string
	for _, c := range commands {
		got = append(got, fmt.Sprintf("%s %d", c, cuts[c].Load()))
		if cuts[c].Load() == 0 {
			t.Errorf("no reply to %s was lost: the test did not reach it", c)
		}
	}
	t.Logf("%d holds served; replies lost: %s; subscriptions half-opened %d times", served, strings.Join(got, ", "), halfOpened)
	if want := children * 2 * seamHolds; served != want {
		t.Errorf("%d holds served, want %d: a waiter was not served", served, want)
	}
	if n := direct.Get(t.Context(), "seams:holders").Val(); n != "0" && n != "" {
		t.Errorf("the holders counter is %s after every hold ended, want 0", n)
	}
}

// seamsChild holds the lock (LEASEKIT_SEAMS: "proxy direct kind name") in
// Do, from two goroutines, seamHolds times each, through the proxy; inside
// fn it counts the holders on the server directly. It prints a line for
// every overlap and every error, and "served n" at the end.
func seamsChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_SEAMS"))
	client := redis.NewClient(&redis.Options{Addr: f[0]})
	defer client.Close()
	direct := redis.NewClient(&redis.Options{Addr: f[1]})
	defer direct.Close()
	kind, name := f[2], f[3]
	do, closeLocker := seamsDo(kind, client)
	defer closeLocker()
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var served atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range seamHolds {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := do(ctx, name, 900*time.Millisecond, func(ctx context.Context) error {
					if n := direct.Incr(context.Background(), "seams:holders").Val(); n != 1 {
						say("overlap: %d holders at once", n)
					}
					select {
					case <-time.After(350 * time.Millisecond): // past a refresh, at a third of the ttl
					case <-ctx.Done():
					}
					direct.Decr(context.Background(), "seams:holders")
					return ctx.Err()
				})
				cancel()
				if err != nil {
					say("error: %v", err)
					continue
				}
				served.Add(1)
			}
		})
	}
	wg.Wait()
	say("served %d", served.Load())
	return 0
}

// seamsDo is the Do of kind ("efficiency", "correctness", "semaphore": one
// permit) on client, and what closes its Locker.
func seamsDo(kind string, client *redis.Client) (func(context.Context, string, time.Duration, func(context.Context) error) error, func()) {
	switch kind {
	case "correctness":
		l := correctness.New(client, correctness.WithAudit(false), correctness.WithLogger(quiet))
		return func(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error) error {
			return l.Do(ctx, name, ttl, func(ctx context.Context, _ uint64) error { return fn(ctx) })
		}, func() { _ = l.Close() }
	case "semaphore":
		l := efficiency.New(client, efficiency.WithLogger(quiet))
		return func(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error) error {
			return l.Semaphore(name, 1).Do(ctx, ttl, fn)
		}, func() { _ = l.Close() }
	}
	l := efficiency.New(client, efficiency.WithLogger(quiet))
	return l.Do, func() { _ = l.Close() }
}

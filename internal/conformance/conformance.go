// Package conformance is the suite every client adapter of leasekit passes
// (port.GoRedis, and the rueidis and valkey-go ones in their modules): the
// same cases, through the faces a user calls (efficiency.NewConn,
// correctness.NewConn, correctness.NewRegisterConn), on a real redis-server,
// on a 3-master cluster, behind a proxy that loses replies, and in worker
// processes frozen, killed and restarted (package chaos). A new adapter is
// an Adapter value, a TestMain that calls Main with it and a test that
// calls Run with it.
package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/chaos"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// Adapter makes the Conns of one client library.
type Adapter struct {
	// Name names the adapter in the subtests.
	Name string
	// Dial returns a Conn through a new client of the adapter's library on
	// the server at addrs[0], or on the cluster whose nodes are addrs when
	// there are several, and the func that closes the client.
	Dial func(addrs ...string) (port.Conn, func(), error)
}

// conn is a Conn of a's on addrs, its client closed when t ends.
func (a Adapter) conn(t testing.TB, addrs ...string) port.Conn {
	t.Helper()
	c, closeClient, err := a.Dial(addrs...)
	if err != nil {
		t.Fatalf("%s: dial %v: %v", a.Name, addrs, err)
	}
	t.Cleanup(closeClient)
	return c
}

// mainRan says that the test binary's TestMain called Main, so that the
// chaos workers run.
var mainRan bool

// Main is an adapter test binary's TestMain, m.Run's status: in a worker
// process of the chaos cases it runs the worker, on Conns of a's, instead.
func Main(m *testing.M, a Adapter) int {
	proc.Main(map[string]func() int{
		chaos.Role: chaos.Worker(func(addr string) (port.Conn, func(), error) { return a.Dial(addr) }),
	})
	mainRan = true
	return redistest.Main(m)
}

// target is one deployment a case runs on: a Conn factory (a new client
// each call, as processes have), and a go-redis client of the harness's for
// what the case checks behind the adapter's back.
type target struct {
	conn  func(t testing.TB) port.Conn
	admin redis.UniversalClient
	// kill drops every subscription connection of the deployment's clients.
	kill func(t testing.TB)
	// proxy, for the faulty cases alone, stands between the Conns and the
	// server.
	proxy *faultproxy.Proxy
}

// Run runs the suite on a's Conns: every case on a real redis-server, and
// then on a 3-master cluster; the faulty cases on a server behind a proxy
// that loses replies and half-opens subscriptions; and the chaos test of
// every kind of lock, whose workers run on a's Conns (LEASEKIT_CHAOS sets
// each phase's length, default 2s). The test binary's TestMain must call
// Main.
func Run(t *testing.T, a Adapter) {
	if !mainRan {
		t.Fatal("conformance: the test binary's TestMain must call conformance.Main, which runs the chaos workers")
	}
	t.Run("single", func(t *testing.T) {
		b := redistest.Real(t)
		run(t, target{
			conn:  func(t testing.TB) port.Conn { return a.conn(t, b.Server.Addr) },
			admin: b.Client,
			kill:  func(t testing.TB) { killPubSub(t, b.Client) },
		})
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.StartCluster(t, 3)
		addrs := make([]string, 0, len(c.Servers))
		for _, s := range c.Servers {
			addrs = append(addrs, s.Addr)
		}
		admin := c.Client(t)
		run(t, target{
			conn:  func(t testing.TB) port.Conn { return a.conn(t, addrs...) },
			admin: admin,
			kill: func(t testing.TB) {
				for _, s := range c.Masters() {
					killPubSub(t, s.Client(t))
				}
			},
		})
	})
	t.Run("faults", func(t *testing.T) {
		b := redistest.Real(t)
		p, err := faultproxy.New(b.Server.Addr)
		if err != nil {
			t.Fatalf("faultproxy: %v", err)
		}
		t.Cleanup(func() { _ = p.Close() })
		tg := target{
			conn:  func(t testing.TB) port.Conn { return a.conn(t, p.Addr()) },
			admin: b.Client,
			proxy: p,
		}
		for _, c := range faulty {
			t.Run(c.name, func(t *testing.T) { c.run(t, tg) })
		}
	})
	t.Run("processes", func(t *testing.T) {
		d := chaos.Duration(t, 2*time.Second)
		for _, kind := range chaos.Kinds {
			t.Run(kind, func(t *testing.T) { chaos.Run(t, kind, d) })
		}
	})
}

func run(t *testing.T, tg target) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, tg) })
	}
}

// faulty are the cases run behind the proxy, one after another.
var faulty = []struct {
	name string
	run  func(t *testing.T, tg target)
}{
	{"LostAcquireReply", lostAcquireReply},
	{"LostReleaseReply", lostReleaseReply},
	{"HalfOpenSubscription", halfOpenSubscription},
}

// cutAfter arms the proxy to lose the reply to the next request that names
// key by one of the commands (any case), and returns a check, for after the
// call, that fails the test unless it fired.
func cutAfter(t *testing.T, p *faultproxy.Proxy, key string, commands ...string) (fired func()) {
	var hit atomic.Bool
	p.CutAfterRequest(func(chunk []byte) bool {
		if !bytes.Contains(chunk, []byte(key)) {
			return false
		}
		upper := bytes.ToUpper(chunk)
		for _, c := range commands {
			if bytes.Contains(upper, []byte("\r\n"+c+"\r\n")) {
				hit.Store(true)
				return true
			}
		}
		return false
	})
	return func() {
		t.Helper()
		p.CutAfterRequest(nil)
		if !hit.Load() {
			t.Fatalf("the proxy saw no %v of %s to lose the reply of", commands, key)
		}
	}
}

// lostAcquireReply: the server grants a lock whose reply is lost. The
// acquire returns the grant, or an error that is no "taken" (the key holds
// the caller's own grant); and a failed one leaves the lock free, or held
// by the caller's next try, never stuck for its ttl.
func lostAcquireReply(t *testing.T, tg target) {
	ctx := ctxFor(t)
	for _, kind := range []string{"efficiency", "correctness"} {
		t.Run(kind, func(t *testing.T) {
			name := "lost-acquire-" + kind
			key := "leasekit:{" + name + "}"
			var try func() (func() error, error)
			if kind == "efficiency" {
				l := efficiencyLocker(t, tg)
				try = func() (func() error, error) {
					lk, err := l.TryObtain(ctx, name, time.Minute)
					if err != nil {
						return nil, err
					}
					return func() error { return lk.Release(ctx) }, nil
				}
			} else {
				l := correctnessLocker(t, tg)
				try = func() (func() error, error) {
					ls, err := l.TryAcquire(ctx, name, time.Minute)
					if err != nil {
						return nil, err
					}
					return func() error { return ls.Release(ctx) }, nil
				}
			}
			fired := cutAfter(t, tg.proxy, key, "SET", "EVALSHA", "EVAL")
			release, err := try()
			fired()
			if errors.Is(err, efficiency.ErrTaken) || errors.Is(err, correctness.ErrTaken) {
				t.Fatalf("an acquire whose reply was lost: %v, while the key holds the caller's grant", err)
			}
			if err != nil {
				// Not reported: the grant must not block the lock.
				release, err = try()
				if err != nil {
					t.Fatalf("after an acquire that failed with a lost reply, the next try: %v", err)
				}
			}
			if err := release(); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if n, err := tg.admin.Exists(ctx, key).Result(); err != nil || n != 0 {
				t.Fatalf("EXISTS %s after the release = %d, %v; want 0", key, n, err)
			}
		})
	}
}

// lostReleaseReply: a release whose reply is lost took effect. Release
// returns nil, or an error that is no lost lease (ErrNotHeld, ErrLockLost);
// a second Release then finds its own release and returns nil; the key is
// gone.
func lostReleaseReply(t *testing.T, tg target) {
	ctx := ctxFor(t)
	l := efficiencyLocker(t, tg)
	lk, err := l.TryObtain(ctx, "lost-release", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	fired := cutAfter(t, tg.proxy, lk.Key(), "EVALSHA", "EVAL", "DELEX", "DELIFEQ")
	err = lk.Release(ctx)
	fired()
	if errors.Is(err, efficiency.ErrNotHeld) || errors.Is(err, efficiency.ErrLockLost) {
		t.Fatalf("a release whose reply was lost: %v, want nil or a Redis failure", err)
	}
	if err != nil {
		if err := lk.Release(ctx); err != nil {
			t.Fatalf("Release again after its reply was lost: %v, want nil (its own release)", err)
		}
	}
	if n, err := tg.admin.Exists(ctx, lk.Key()).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after the release = %d, %v; want 0", lk.Key(), n, err)
	}
}

// halfOpenSubscription: the waiter's subscription goes half-open (the
// server forgets it; the client hears nothing, and its writes vanish), and
// the engine's health check finds it, subscribes again and checks the lock:
// the waiter gets the lock that was released meanwhile, long before the
// holder's ttl (a minute) would free it.
func halfOpenSubscription(t *testing.T, tg target) {
	ctx := ctxFor(t)
	holder, waiter := efficiencyLocker(t, tg), efficiencyLocker(t, tg)
	lk, err := holder.TryObtain(ctx, "half-open", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Obtain(ctx, "half-open", time.Minute)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitQueued(t, ctx, holder, "half-open", 1)
	tg.proxy.HalfOpenSubscriptions()
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, tg target)
}{
	{"EfficiencyLock", efficiencyLock},
	{"CorrectnessTokensAndFence", correctnessFence},
	{"FIFOHandoff", fifoHandoff},
	{"HandoffAfterSubscriptionsDropped", handoffAfterDrop},
	{"Semaphore", semaphore},
	{"ElectionObserved", election},
	{"OperatorTools", operatorTools},
	{"ServerErrorsAndNil", serverErrors},
}

// ctxFor is a context that ends with the test, or after a minute.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func efficiencyLocker(t *testing.T, tg target) *efficiency.Locker {
	l := efficiency.NewConn(tg.conn(t))
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func correctnessLocker(t *testing.T, tg target) *correctness.Locker {
	l := correctness.NewConn(tg.conn(t), correctness.WithAudit(false))
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// efficiencyLock: a grant, a refusal while held (ErrTaken), its ttl read and
// refreshed, its release, and ErrNotHeld for a release of a released lock.
func efficiencyLock(t *testing.T, tg target) {
	ctx := ctxFor(t)
	a, b := efficiencyLocker(t, tg), efficiencyLocker(t, tg)
	lk, err := a.TryObtain(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	if _, err := b.TryObtain(ctx, "job", 10*time.Second); !errors.Is(err, efficiency.ErrTaken) {
		t.Fatalf("TryObtain of a held lock: %v, want ErrTaken", err)
	}
	if err := lk.Refresh(ctx, 20*time.Second); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	left, err := lk.TTL(ctx)
	if err != nil || left <= 10*time.Second || left > 20*time.Second {
		t.Fatalf("TTL after Refresh(20s) = %v, %v", left, err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := lk.Release(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
	if n, err := tg.admin.Exists(ctx, lk.Key()).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after Release = %d, %v; want 0", lk.Key(), n, err)
	}
	again, err := b.TryObtain(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatalf("TryObtain after the release: %v", err)
	}
	_ = again.Release(ctx)
}

// correctnessFence: tokens grow with every grant, and a Register made on
// the adapter refuses the older token once the newer has written.
func correctnessFence(t *testing.T, tg target) {
	ctx := ctxFor(t)
	l := correctnessLocker(t, tg)
	reg := correctness.NewRegisterConn(tg.conn(t))
	first, err := l.TryAcquire(ctx, "account", 10*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := reg.Write(ctx, "account", first.Token(), []byte("a")); err != nil {
		t.Fatalf("Write with the first token: %v", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	second, err := l.TryAcquire(ctx, "account", 10*time.Second)
	if err != nil {
		t.Fatalf("second TryAcquire: %v", err)
	}
	defer func() { _ = second.Release(ctx) }()
	if second.Token() <= first.Token() {
		t.Fatalf("tokens %d then %d: want growing", first.Token(), second.Token())
	}
	if err := reg.Write(ctx, "account", second.Token(), []byte("b")); err != nil {
		t.Fatalf("Write with the second token: %v", err)
	}
	err = reg.Write(ctx, "account", first.Token(), []byte("stale"))
	var stale *correctness.StaleTokenError
	if !errors.As(err, &stale) || !errors.Is(err, correctness.ErrStaleToken) {
		t.Fatalf("Write with the older token: %v, want a *StaleTokenError", err)
	}
	v, tok, err := reg.Read(ctx, "account")
	if err != nil || string(v) != "b" || tok != second.Token() {
		t.Fatalf("Read = %q, %d, %v; want \"b\", %d", v, tok, err, second.Token())
	}
}

// waitQueued waits until the lock called name has n live waiters queued.
func waitQueued(t *testing.T, ctx context.Context, l *efficiency.Locker, name string, n int) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("%d waiters queued for %s", n, name), func() (int, error) {
		info, err := l.Inspect(ctx, name)
		return info.Waiters, err
	}, n)
}

// waitFor waits until read gives at least n: what counts what it reads.
func waitFor(t *testing.T, ctx context.Context, what string, read func() (int, error), n int) {
	t.Helper()
	for {
		got, err := read()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %d so far: %v", what, got, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// fifoHandoff: waiters queued one after another, each on a Locker of its
// own, are handed the lock in the order they queued, each by its
// predecessor's release: the holder's ttl (a minute) never runs out.
func fifoHandoff(t *testing.T, tg target) {
	ctx := ctxFor(t)
	const waiters = 4
	holder := efficiencyLocker(t, tg)
	lk, err := holder.TryObtain(ctx, "queue", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	order := make(chan int, waiters)
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		l := efficiencyLocker(t, tg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := l.Obtain(ctx, "queue", time.Minute)
			if err != nil {
				errs <- fmt.Errorf("waiter %d: Obtain: %w", i, err)
				return
			}
			order <- i
			if err := got.Release(ctx); err != nil {
				errs <- fmt.Errorf("waiter %d: Release: %w", i, err)
			}
		}()
		waitQueued(t, ctx, holder, "queue", i+1)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wg.Wait()
	close(order)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	next := 0
	for i := range order {
		if i != next {
			t.Fatalf("waiter %d was handed the lock in turn %d: not in queue order", i, next)
		}
		next++
	}
	if next != waiters {
		t.Fatalf("%d waiters were handed the lock, want %d", next, waiters)
	}
}

// handoffAfterDrop: the server drops every subscription connection while a
// waiter waits (CLIENT KILL TYPE pubsub); the adapter's client dials again,
// and the waiter is still handed the lock by the release, long before the
// holder's ttl (a minute) would free it.
func handoffAfterDrop(t *testing.T, tg target) {
	ctx := ctxFor(t)
	holder, waiter := efficiencyLocker(t, tg), efficiencyLocker(t, tg)
	lk, err := holder.TryObtain(ctx, "dropped", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Obtain(ctx, "dropped", time.Minute)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	waitQueued(t, ctx, holder, "dropped", 1)
	tg.kill(t)
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}

// semaphore: a limit of 2 grants two permits and queues the third
// acquire, which the first release hands a permit.
func semaphore(t *testing.T, tg target) {
	ctx := ctxFor(t)
	a, b := efficiencyLocker(t, tg), efficiencyLocker(t, tg)
	sa, sb := a.Semaphore("slots", 2), b.Semaphore("slots", 2)
	p1, err := sa.TryAcquire(ctx, time.Minute)
	if err != nil {
		t.Fatalf("first permit: %v", err)
	}
	p2, err := sb.TryAcquire(ctx, time.Minute)
	if err != nil {
		t.Fatalf("second permit: %v", err)
	}
	if _, err := sb.TryAcquire(ctx, time.Minute); !errors.Is(err, efficiency.ErrNotObtained) {
		t.Fatalf("third TryAcquire: %v, want ErrNotObtained", err)
	}
	info, err := sa.Inspect(ctx)
	if err != nil || info.Held != 2 {
		t.Fatalf("Inspect = %+v, %v; want 2 held", info, err)
	}
	got := make(chan error, 1)
	go func() {
		p, err := sb.Acquire(ctx, time.Minute)
		if err == nil {
			err = p.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, ctx, "a waiter queued for a permit", func() (int, error) {
		info, err := sa.Inspect(ctx)
		return info.Waiters, err
	}, 1)
	if err := p1.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the queued acquire: %v", err)
	}
	_ = p2.Release(ctx)
}

// election: a candidate takes office, a second Locker's Observe sees it
// with its term, and, after it resigns, sees the next leader's greater term.
func election(t *testing.T, tg target) {
	ctx := ctxFor(t)
	a, b, watcher := correctnessLocker(t, tg), correctnessLocker(t, tg), correctnessLocker(t, tg)
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	seen, err := watcher.Observe(watchCtx, "leader")
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	terms := make(chan uint64, 2)
	resign := make(chan struct{})
	campaign := func(l *correctness.Locker, value string) error {
		return l.Campaign(ctx, "leader", 10*time.Second, []byte(value), func(ctx context.Context, term uint64) error {
			terms <- term
			<-resign
			return nil
		})
	}
	done := make(chan error, 2)
	go func() { done <- campaign(a, "a") }()
	first := <-terms
	go func() { done <- campaign(b, "b") }()
	if ld := next(t, seen, "a"); ld.Term != first {
		t.Fatalf("Observe saw a in term %d, want %d", ld.Term, first)
	}
	resign <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("a's Campaign: %v", err)
	}
	second := <-terms
	if ld := next(t, seen, "b"); ld.Term != second || second <= first {
		t.Fatalf("Observe saw b in term %d after %d (b's term %d)", ld.Term, first, second)
	}
	close(resign)
	if err := <-done; err != nil {
		t.Fatalf("b's Campaign: %v", err)
	}
}

// next returns the first leader seen whose value is want.
func next(t *testing.T, seen <-chan correctness.Leader, want string) correctness.Leader {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ld, ok := <-seen:
			if !ok {
				t.Fatalf("Observe's channel closed before %q led", want)
			}
			if string(ld.Value) == want {
				return ld
			}
		case <-timeout:
			t.Fatalf("Observe did not see %q lead", want)
		}
	}
}

// operatorTools: Inspect reads a held lock, Break frees it (and says so
// once), and the broken holder's Refresh finds its lease gone.
func operatorTools(t *testing.T, tg target) {
	ctx := ctxFor(t)
	l, op := correctnessLocker(t, tg), correctnessLocker(t, tg)
	lease, err := l.TryAcquire(ctx, "stuck", time.Minute)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	info, err := op.Inspect(ctx, "stuck")
	if err != nil || !info.Held {
		t.Fatalf("Inspect = %+v, %v; want held", info, err)
	}
	if broken, err := op.Break(ctx, "stuck"); err != nil || !broken {
		t.Fatalf("Break = %v, %v; want true", broken, err)
	}
	if broken, err := op.Break(ctx, "stuck"); err != nil || broken {
		t.Fatalf("second Break = %v, %v; want false", broken, err)
	}
	if err := lease.Refresh(ctx, time.Minute); !errors.Is(err, correctness.ErrNotHeld) {
		t.Fatalf("Refresh of a broken lease: %v, want ErrNotHeld", err)
	}
	// The audit reads every master's CONFIG and INFO through the adapter.
	findings, err := op.Audit(ctx)
	if err != nil || len(findings) == 0 {
		t.Fatalf("Audit = %d findings, %v", len(findings), err)
	}
}

// serverErrors: the adapter gives a server's error reply as one (a
// WRONGTYPE on a forged key names the key) and a missing key as Nil, as
// the port's conventions say.
func serverErrors(t *testing.T, tg target) {
	ctx := ctxFor(t)
	c := tg.conn(t)
	if _, err := c.Do(ctx, "GET", "conformance:missing"); err != port.Nil {
		t.Fatalf("GET of a missing key: %v, want port.Nil", err)
	}
	if err := tg.admin.LPush(ctx, "conformance:list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := c.Do(ctx, "GET", "conformance:list")
	var reply port.ServerError
	if !errors.As(err, &reply) || len(err.Error()) < 9 || err.Error()[:9] != "WRONGTYPE" {
		t.Fatalf("GET of a list: %v (%T), want the server's WRONGTYPE as a ServerError", err, err)
	}
	l := efficiencyLocker(t, tg)
	name := "forged"
	if _, err := tg.admin.Do(ctx, "HSET", "leasekit:{"+name+"}", "f", "v").Result(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(ctx, name, time.Second); err == nil || errors.Is(err, efficiency.ErrTaken) {
		t.Fatalf("TryObtain over a forged hash: %v, want a Redis failure", err)
	}
}

// killPubSub drops every subscription connection of the server c talks to.
func killPubSub(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	if err := c.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub: %v", err)
	}
}

package processes_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// giveUpChild runs n waiters for one lock (LEASEKIT_GIVE_UP: "addr kind name n
// mode [ttl]", ttl 2s by default), each of which gives up: mode "deadline:D"
// waits with a context that ends after D, "cancel" with one that ends when a
// line comes on stdin. Its client bounds calls by their context
// (ContextTimeoutEnabled), as the docs advise. It reports "queued" once every
// waiter has started, then "gave up N" when all have returned, and keeps its
// Lockers open (and subscribed) until stdin closes.
func giveUpChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_GIVE_UP"))
	addr, kind, name, mode := f[0], f[1], f[2], f[4]
	n, _ := strconv.Atoi(f[3])
	ttl := 2 * time.Second
	if len(f) > 5 {
		ttl, _ = time.ParseDuration(f[5])
	}
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	l := newLocker(kind, client, &ownerLog{})
	defer l.Close()
	var ctx context.Context
	var cancel context.CancelFunc
	if d, ok := strings.CutPrefix(mode, "deadline:"); ok {
		timeout, _ := time.ParseDuration(d)
		ctx, cancel = context.WithTimeout(context.Background(), timeout)
	} else {
		ctx, cancel = context.WithCancel(context.Background())
	}
	defer cancel()
	var wg sync.WaitGroup
	var gaveUp, got atomic.Int64
	for range n {
		wg.Go(func() {
			g, err := l.Acquire(ctx, name, ttl)
			if err != nil {
				gaveUp.Add(1)
				return
			}
			got.Add(1)
			_ = g.Release(context.Background())
		})
	}
	fmt.Println("queued")
	in := lines()
	if mode == "cancel" {
		<-in
		cancel()
	}
	wg.Wait()
	fmt.Println("gave up", gaveUp.Load(), "got", got.Load())
	for range in {
	}
	return 0
}

// TestWaitersThatGiveUpWhileRedisIsSlowCostNoTTL: waiters that give up
// while Redis is paused cannot take their entries out of the queue (their
// release blocks past their context). Their process, still subscribed, is
// alive, so a release that hands one of them the lock would leave it held
// for a ttl by nobody. Here the lock goes through five holder-to-waiter
// handoffs after that, and none of its grants may end by expiry (a keyspace
// notification says so): each is handed over or found by a recheck.
func TestWaitersThatGiveUpWhileRedisIsSlowCostNoTTL(t *testing.T) {
	for _, kind := range []string{"efficiency", "correctness"} {
		for _, mode := range []string{"deadline:2s", "cancel"} {
			t.Run(kind+"/"+strings.TrimSuffix(mode, ":2s"), func(t *testing.T) { testSlowRedisGiveUp(t, kind, mode) })
		}
	}
}

func testSlowRedisGiveUp(t *testing.T, kind, mode string) {
	b := redistest.Real(t)
	ctx := t.Context()
	const name, waiters = "slow", 10
	queue := lockKey(name) + ":queue"
	expired := expiries(t, b.Client, lockKey(name))

	parent := newLocker(kind, b.Client, &ownerLog{})
	defer parent.Close()
	holder, err := parent.Acquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	child := proc.Start(t, "give-up", fmt.Sprintf("LEASEKIT_GIVE_UP=%s %s %s %d %s", b.Server.Addr, kind, name, waiters, mode))
	if got := child.Line(30 * time.Second); got != "queued" {
		t.Fatalf("child: got %q", got)
	}
	awaitQueue(t, b.Client, queue, waiters)
	// Writes (and scripts) wait: the waiters give up meanwhile (their
	// deadline comes 2 s after they started, or they are cancelled now), and
	// so do the releases they send to leave the queue (1 s later).
	pause := 2500
	if mode != "cancel" {
		pause = 4000
	}
	if err := b.Client.Do(ctx, "CLIENT", "PAUSE", pause, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	if mode == "cancel" {
		child.Send("cancel")
	}
	if got := child.Line(30 * time.Second); got != fmt.Sprintf("gave up %d got 0", waiters) {
		t.Fatalf("child: got %q, want every waiter to give up", got)
	}
	// A write of our own waits out the pause.
	if err := b.Client.Set(ctx, "after-the-pause", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for cycle := range 5 {
		next := newLocker(kind, b.Client, &ownerLog{})
		got := make(chan grant, 1)
		go func() {
			g, err := next.Acquire(ctx, name, 2*time.Second)
			if err != nil {
				t.Errorf("cycle %d: %v", cycle, err)
			}
			got <- g
		}()
		awaitMember(t, b.Client, queue)
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("cycle %d: release: %v", cycle, err)
		}
		holder = <-got
		next.Close()
		if holder == nil {
			t.FailNow()
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := expired.Load(); n != 0 {
		t.Fatalf("%d grants of the lock ended by expiry: a waiter that had given up was handed the lock", n)
	}
	child.Close()
}

// expiries counts the expiries of key from now on (keyspace notifications).
func expiries(t *testing.T, c *redis.Client, key string) *atomic.Int64 {
	t.Helper()
	ctx := t.Context()
	if err := c.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.ConfigSet(context.Background(), "notify-keyspace-events", "") })
	ps := c.Subscribe(ctx, "__keyevent@0__:expired")
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ps.Channel() {
			if m.Payload == key {
				n.Add(1)
			}
		}
	}()
	t.Cleanup(func() { _ = ps.Close(); <-done })
	return &n
}

// awaitMember waits until the queue has an entry.
func awaitMember(t *testing.T, c redis.UniversalClient, queue string) {
	t.Helper()
	await(t, "an entry in "+queue, func() bool { return c.ZCard(t.Context(), queue).Val() > 0 })
}

// TestManyWaitersGiveUpOnABusyMachine: 5000 waiters in one process, on a
// machine whose every core is busy, give up after 4 s; the queue is then
// cleared of their entries, and 200 new waiters are all served.
func TestManyWaitersGiveUpOnABusyMachine(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	const name = "crowd"
	queue := lockKey(name) + ":queue"
	hogs(t, 2)
	parent := newLocker("efficiency", b.Client, &ownerLog{})
	defer parent.Close()
	holder, err := parent.Acquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	crowd := proc.Start(t, "give-up", fmt.Sprintf("LEASEKIT_GIVE_UP=%s efficiency %s 5000 deadline:4s", b.Server.Addr, name))
	if got := crowd.Line(time.Minute); got != "queued" {
		t.Fatalf("crowd: got %q", got)
	}
	got := crowd.Line(2 * time.Minute)
	var gaveUp, granted int
	if _, err := fmt.Sscanf(got, "gave up %d got %d", &gaveUp, &granted); err != nil || gaveUp != 5000 {
		t.Fatalf("crowd: got %q, want all 5000 to give up", got)
	}
	// Their entries leave the queue: taken out as they give up, or by
	// their Locker once Redis answers it.
	left, since := b.Client.ZCard(ctx, queue).Val(), time.Now()
	await(t, "the queue cleared", func() bool { return b.Client.ZCard(ctx, queue).Val() == 0 })
	t.Logf("5000 waiters gave up; %d of their entries were still queued then, none %v later", left, time.Since(since).Round(time.Millisecond))

	served := proc.Start(t, "serve", fmt.Sprintf("LEASEKIT_SERVE=%s %s 200", b.Server.Addr, name))
	if got := served.Line(time.Minute); got != "started" {
		t.Fatalf("new waiters: got %q", got)
	}
	awaitMember(t, b.Client, queue)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := served.Line(2 * time.Minute); got != "served 200" {
		t.Fatalf("new waiters: got %q, want all 200 served", got)
	}
	crowd.Close()
}

// serveChild runs n waiters for one lock (LEASEKIT_SERVE: "addr name n"),
// each of which takes it and releases it, and reports how many were served.
func serveChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_SERVE"))
	addr, name := f[0], f[1]
	n, _ := strconv.Atoi(f[2])
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	l := newLocker("efficiency", client, &ownerLog{})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var served atomic.Int64
	for range n {
		wg.Go(func() {
			g, err := l.Acquire(ctx, name, 10*time.Second)
			if err != nil {
				return
			}
			if g.Release(context.Background()) == nil {
				served.Add(1)
			}
		})
	}
	fmt.Println("started")
	wg.Wait()
	fmt.Println("served", served.Load())
	return 0
}

// hogs keeps n cores busy until the test ends.
func hogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		hog := exec.Command("sh", "-c", "while :; do :; done")
		if err := hog.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hog.Process.Kill(); _ = hog.Wait() })
	}
}

package processes_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// waiterChild waits for a lock or permit (LEASEKIT_WAITER: "addr kind name
// ttl [pausable]"), then reports whether the server holds the grant it got,
// as soon as the acquire returns; it releases the lock when told to on stdin.
// A pausable child first prints "queued" once it has read the reply of the
// script that queued it (queuedHook), and waits a minute for any reply: a
// reply that reached it while it was stopped is read on resume, not taken
// for a timeout (go-redis would send that command again).
func waiterChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_WAITER"))
	addr, kind, name := f[0], f[1], f[2]
	ttl, _ := time.ParseDuration(f[3])
	pausable := len(f) > 4 && f[4] == "pausable"
	ctx := context.Background()
	opts := &redis.Options{Addr: addr}
	if pausable {
		opts.ReadTimeout, opts.WriteTimeout = time.Minute, time.Minute
	}
	client := redis.NewClient(opts)
	defer client.Close()
	if pausable {
		client.AddHook(&queuedHook{queue: lockKey(name) + ":queue"})
	}
	owners := &ownerLog{}
	l := newLocker(kind, client, owners)
	defer l.Close()
	acquireCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	g, err := l.Acquire(acquireCtx, name, ttl)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	status := checkHeld(ctx, client, name, owners.Owner(), g)
	if _, ok := semaphoreLimit(kind); ok {
		status = checkPermitHeld(ctx, client, name, owners.Owner(), g)
	}
	fmt.Println("acquired", g.Token(), status)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 1
	}
	fmt.Println("released", g.Release(ctx))
	return 0
}

// queuedHook prints "queued" once, when the script that queued the child
// comes back without an error: the child has read its reply. A SIGSTOP before
// that can catch the reply in the socket; read on resume past its deadline,
// it is a timeout, which go-redis answers by sending the script again. That
// attempt knows no place (its reply never came), so it queues at the back: a
// pause at that moment costs the waiter its place, which is not the story
// TestPausedWaiterGetsNoLeaseItGaveAway tells.
type queuedHook struct {
	queue string
	once  sync.Once
}

func (h *queuedHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *queuedHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.seen(cmd)
		return err
	}
}

func (h *queuedHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.seen(cmd)
		}
		return err
	}
}

// seen prints "queued" the first time a script on the queue key that carries
// a queue entry (six fields: the wait script's) succeeds. The fenced probe
// names the queue key too, but queues nothing.
func (h *queuedHook) seen(cmd redis.Cmder) {
	if cmd.Err() != nil || !strings.HasPrefix(cmd.Name(), "eval") || !slices.Contains(cmd.Args(), any(h.queue)) {
		return
	}
	for _, arg := range cmd.Args() {
		if s, ok := arg.(string); ok {
			// (A script's own source, sent by EVAL, is no entry.)
			if _, _, entry := scripts.EntryTicket(s); !entry || strings.Contains(s, "\n") {
				continue
			}
			h.once.Do(func() { fmt.Println("queued") })
			return
		}
	}
}

// TestPausedWaiterGetsNoLeaseItGaveAway replays, step by step, the double
// grant an outside check found: a waiter frozen while queued is handed the
// lock, which expires while it is frozen; once resumed, it queues again at
// its old place and is handed the lock again; only then does the first grant
// message reach it. That message is for an earlier queue entry and a grant
// long gone: the waiter must not release the new grant because of it (which
// hands the lock to the next waiter) and then return that grant as its lease.
// A proxy between the waiter and Redis holds back what its subscription
// connection receives, so that the messages arrive in this order every time.
func TestPausedWaiterGetsNoLeaseItGaveAway(t *testing.T) {
	for _, kind := range []string{"efficiency", "correctness"} {
		t.Run(kind, func(t *testing.T) { testPausedWaiter(t, kind) })
	}
}

func testPausedWaiter(t *testing.T, kind string) {
	b := redistest.Real(t)
	ctx := t.Context()
	proxy, err := faultproxy.New(b.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	const name = "paused-waiter"
	queue := lockKey(name) + ":queue"
	parent := newLocker(kind, b.Client, &ownerLog{})
	defer parent.Close()
	first, err := parent.Acquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// The child's lease is 2 s: it stays frozen longer than that, and
	// longer than the 1 s a waiter sleeps at most before it asks again.
	const childTTL = 2 * time.Second
	child := proc.Start(t, "waiter", fmt.Sprintf("LEASEKIT_WAITER=%s %s %s %s pausable", proxy.Addr(), kind, name, childTTL))
	if got := child.Line(30 * time.Second); got != "queued" {
		t.Fatalf("child: got %q, want queued", got)
	}
	awaitQueue(t, b.Client, queue, 1)
	childPlace := b.Client.ZRangeWithScores(ctx, queue, 0, 0).Val()[0].Score
	proxy.HoldSubscriptions()
	child.Stop()

	// Handed to the frozen child: its grant message waits in the proxy.
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if proxy.Held() != 1 {
		awaitHeld(t, proxy, 1)
	}
	awaitGone(t, b.Client, lockKey(name), childTTL+10*time.Second)
	second, err := parent.Acquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A third waiter queues behind the child's old place.
	third := newLocker(kind, b.Client, &ownerLog{})
	defer third.Close()
	thirdGot := make(chan grant, 1)
	go func() {
		g, err := third.Acquire(ctx, name, time.Minute)
		if err != nil {
			t.Errorf("third waiter: %v", err)
			close(thirdGot)
			return
		}
		thirdGot <- g
	}()
	awaitQueue(t, b.Client, queue, 1)

	// Resumed, the child asks Redis again and queues at its old place,
	// ahead of the third waiter; the parent's release hands it the lock.
	child.Continue()
	awaitQueue(t, b.Client, queue, 2)
	before := queueState(t, b.Client, queue, lockKey(name))
	if head := b.Client.ZRangeWithScores(ctx, queue, 0, 0).Val(); len(head) != 1 || head[0].Score != childPlace {
		t.Fatalf("the resumed child did not queue again at its place %.0f, ahead of the third waiter: %s", childPlace, before)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); proxy.Held() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the child's second grant message (%d held); before the release: %s; now: %s",
				proxy.Held(), before, queueState(t, b.Client, queue, lockKey(name)))
		}
	}

	// Now the first, stale, grant message; then, after the child has had
	// time to act on it, the second.
	proxy.ReleaseOne()
	select {
	case g := <-thirdGot:
		// Not a failure by itself: the child reports what it got below.
		thirdGot <- g
	case <-time.After(time.Second):
	}
	proxy.ReleaseHeld()

	got := child.Line(30 * time.Second)
	if !strings.HasPrefix(got, "acquired ") || !strings.HasSuffix(got, " held") {
		t.Fatalf("child after the pause: got %q, want its acquire to return a grant the server holds", got)
	}
	select {
	case g := <-thirdGot:
		t.Fatalf("the third waiter got the lock (token %d) while the child held it", g.Token())
	default:
	}
	child.Send("release")
	if got := child.Line(30 * time.Second); got != "released <nil>" {
		t.Fatalf("child's release: got %q", got)
	}
	select {
	case g := <-thirdGot:
		if g != nil {
			_ = g.Release(ctx)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the third waiter did not get the lock after the child released it")
	}
}

// queueState describes queue and the lock at lock for a failure message,
// without an owner id: each entry's place, its channel's subscribers, and
// which entry's owner the lock holds.
func queueState(t *testing.T, c redis.UniversalClient, queue, lock string) string {
	t.Helper()
	ctx := t.Context()
	held := c.Get(ctx, lock).Val()
	pv, err := scripts.ParseValue(held, true)
	if err != nil { // an efficiency lock's value: no token
		pv, _ = scripts.ParseValue(held, false)
	}
	owner := pv.Owner
	var out []string
	holder := "nobody"
	if held != "" {
		holder = "an owner not queued"
	}
	for i, z := range c.ZRangeWithScores(ctx, queue, 0, -1).Val() {
		member, _ := z.Member.(string)
		_, channel, ok := scripts.EntryTicket(member)
		if !ok {
			out = append(out, fmt.Sprintf("entry %d: malformed", i))
			continue
		}
		subs := c.PubSubNumSub(ctx, channel).Val()[channel]
		out = append(out, fmt.Sprintf("entry %d at %.0f: %d subscribers", i, z.Score, subs))
		if scripts.EntryOwner(member) == owner {
			holder = fmt.Sprintf("entry %d's owner", i)
		}
	}
	return fmt.Sprintf("queue [%s], lock held by %s", strings.Join(out, "; "), holder)
}

// awaitQueue waits until the queue holds n entries.
func awaitQueue(t *testing.T, c redis.UniversalClient, queue string, n int64) {
	t.Helper()
	await(t, fmt.Sprintf("%d entries in %s", n, queue), func() bool { return c.ZCard(t.Context(), queue).Val() == n })
}

// awaitHeld waits until the proxy holds n chunks back.
func awaitHeld(t *testing.T, p *faultproxy.Proxy, n int) {
	t.Helper()
	await(t, fmt.Sprintf("%d messages held", n), func() bool { return p.Held() >= n })
}

// awaitGone waits until key no longer exists.
func awaitGone(t *testing.T, c redis.UniversalClient, key string, d time.Duration) {
	t.Helper()
	await(t, key+" gone", func() bool { return c.Exists(t.Context(), key).Val() == 0 })
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

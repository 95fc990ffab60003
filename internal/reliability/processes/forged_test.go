package processes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// TestForgedGrantBesideTheRealOne replays what the model checker found: a
// forged grant message and the real one reach a queued waiter together,
// in either order. The waiter takes one; its Locker releases the other if
// it is the real grant it did not take, so the next waiter gets the lock
// when the fooled one is done, or at once, and never a ttl later.
func TestForgedGrantBesideTheRealOne(t *testing.T) {
	for _, forgedFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("forged first %v", forgedFirst), func(t *testing.T) {
			testForgedBeside(t, forgedFirst)
		})
	}
}

// forgedScene is a correctness lock held by holder, with two waiters queued
// for it, each on a Locker of its own: the fooled one, whose client reaches
// the server through proxy, and the next one.
type forgedScene struct {
	b                  *redistest.Backend
	proxy              *faultproxy.Proxy
	held               *correctness.Lease
	entry              []string // the fooled waiter's queue entry, by field
	fooledGot, nextGot chan waited
}

// waited is what a waiter's Acquire returned.
type waited struct {
	lease *correctness.Lease
	err   error
}

// newForgedScene sets up a forgedScene on the lock called name.
func newForgedScene(t *testing.T, name string) *forgedScene {
	t.Helper()
	b := redistest.Real(t)
	ctx := t.Context()
	proxy, err := faultproxy.New(b.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	queue := lockKey(name) + ":queue"
	locker := func(c *redis.Client) *correctness.Locker {
		l := correctness.New(c, correctness.WithAudit(false))
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	held, err := locker(b.Client).Acquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fooledClient := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = fooledClient.Close() })
	wait := func(l *correctness.Locker) chan waited {
		c := make(chan waited, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			lease, err := l.Acquire(wctx, name, time.Minute)
			c <- waited{lease, err}
		}()
		return c
	}
	sc := &forgedScene{b: b, proxy: proxy, held: held}
	sc.fooledGot = wait(locker(fooledClient))
	awaitQueue(t, b.Client, queue, 1)
	sc.entry = strings.Fields(b.Client.ZRange(ctx, queue, 0, 0).Val()[0])
	sc.nextGot = wait(locker(b.Client))
	awaitQueue(t, b.Client, queue, 2)
	return sc
}

// forge publishes a grant message of token 999 for the fooled waiter's
// entry, as anyone who may PUBLISH and read the queue could.
func (sc *forgedScene) forge(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	now := sc.b.Client.Time(ctx).Val()
	msg := fmt.Sprintf("%s 999 %d %d", sc.entry[4], now.Unix(), now.Nanosecond()/1000)
	if err := sc.b.Client.Publish(ctx, sc.entry[5], msg).Err(); err != nil {
		t.Fatal(err)
	}
}

func testForgedBeside(t *testing.T, forgedFirst bool) {
	sc := newForgedScene(t, fmt.Sprintf("forged-beside-%v", forgedFirst))
	ctx, proxy, held := t.Context(), sc.proxy, sc.held
	proxy.HoldSubscriptions()
	forge := func() { sc.forge(t) }
	if forgedFirst {
		forge()
		awaitHeld(t, proxy, 1)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !forgedFirst {
		awaitHeld(t, proxy, 1)
		forge()
	}
	awaitHeld(t, proxy, 2)
	proxy.ReleaseHeld()

	r := <-sc.fooledGot
	if r.err != nil {
		t.Fatalf("the fooled waiter: %v", r.err)
	}
	if forgedFirst != (r.lease.Token() == 999) {
		t.Fatalf("the fooled waiter took token %d; want the message that came first (forged first: %v)", r.lease.Token(), forgedFirst)
	}
	if !forgedFirst {
		// It holds the real grant: the next waiter gets the lock when it
		// is done.
		if err := r.lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := <-sc.nextGot
	if got.err != nil {
		t.Fatalf("the next waiter: %v; want the lock, not its 30 s context's end (the ttl is a minute)", got.err)
	}
	defer got.lease.Release(ctx)
	if forgedFirst {
		if err := r.lease.Refresh(ctx, time.Minute); !errors.Is(err, correctness.ErrNotHeld) {
			t.Fatalf("the forged lease's refresh: got %v, want ErrNotHeld", err)
		}
	}
}

// TestForgedGrantWithTheRealOneLost replays what the model checker found
// (model.TestForgedGrantWithTheRealOneLost): a waiter takes a forged grant
// message, and the real one, which the holder's release sends to the same
// entry, does not reach its Locker (held back here until the end, as a
// lost message). The fooled waiter's release finds its grant lost and ends
// the real grant to its entry as it takes the entry out, so the next waiter
// gets the lock then, not at the real grant's ttl.
func TestForgedGrantWithTheRealOneLost(t *testing.T) {
	sc := newForgedScene(t, "forged-real-lost")
	ctx := t.Context()
	sc.forge(t)
	r := <-sc.fooledGot
	if r.err != nil || r.lease.Token() != 999 {
		t.Fatalf("the fooled waiter: got %v, %v; want the forged token 999", r.lease, r.err)
	}
	sc.proxy.HoldSubscriptions() // the real grant message is lost to the fooled Locker
	defer sc.proxy.ReleaseHeld()
	if err := sc.held.Release(ctx); err != nil { // hands the lock to the fooled entry
		t.Fatal(err)
	}
	awaitHeld(t, sc.proxy, 1)
	if err := r.lease.Release(ctx); !errors.Is(err, correctness.ErrNotHeld) {
		t.Fatalf("the fooled waiter's release: got %v, want ErrNotHeld", err)
	}
	got := <-sc.nextGot
	if got.err != nil {
		t.Fatalf("the next waiter: %v; want the lock once the fooled waiter's release ended the real grant to its entry, not its 30 s context's end (the ttl is a minute)", got.err)
	}
	defer got.lease.Release(ctx)
	if got.lease.Token() <= sc.held.Token() {
		t.Fatalf("the next waiter's token %d, want above the holder's %d", got.lease.Token(), sc.held.Token())
	}
}

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

func testForgedBeside(t *testing.T, forgedFirst bool) {
	b := redistest.Real(t)
	ctx := t.Context()
	proxy, err := faultproxy.New(b.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	name := fmt.Sprintf("forged-beside-%v", forgedFirst)
	queue := lockKey(name) + ":queue"
	holder := correctness.New(b.Client, correctness.WithAudit(false))
	defer holder.Close()
	held, err := holder.Acquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fooledClient := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	defer fooledClient.Close()
	fooled := correctness.New(fooledClient, correctness.WithAudit(false))
	defer fooled.Close()
	type result struct {
		lease *correctness.Lease
		err   error
	}
	wait := func(l *correctness.Locker) chan result {
		c := make(chan result, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			lease, err := l.Acquire(wctx, name, time.Minute)
			c <- result{lease, err}
		}()
		return c
	}
	fooledGot := wait(fooled)
	awaitQueue(t, b.Client, queue, 1)
	entry := strings.Fields(b.Client.ZRange(ctx, queue, 0, 0).Val()[0])
	next := correctness.New(b.Client, correctness.WithAudit(false))
	defer next.Close()
	nextGot := wait(next)
	awaitQueue(t, b.Client, queue, 2)

	proxy.HoldSubscriptions()
	forge := func() {
		now := b.Client.Time(ctx).Val()
		msg := fmt.Sprintf("%s 999 %d %d", entry[4], now.Unix(), now.Nanosecond()/1000)
		if err := b.Client.Publish(ctx, entry[5], msg).Err(); err != nil {
			t.Fatal(err)
		}
	}
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

	r := <-fooledGot
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
	got := <-nextGot
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
	b := redistest.Real(t)
	ctx := t.Context()
	proxy, err := faultproxy.New(b.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	name := "forged-real-lost"
	queue := lockKey(name) + ":queue"
	holder := correctness.New(b.Client, correctness.WithAudit(false))
	defer holder.Close()
	held, err := holder.Acquire(ctx, name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fooledClient := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	defer fooledClient.Close()
	fooled := correctness.New(fooledClient, correctness.WithAudit(false))
	defer fooled.Close()
	type result struct {
		lease *correctness.Lease
		err   error
	}
	wait := func(l *correctness.Locker) chan result {
		c := make(chan result, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			lease, err := l.Acquire(wctx, name, time.Minute)
			c <- result{lease, err}
		}()
		return c
	}
	fooledGot := wait(fooled)
	awaitQueue(t, b.Client, queue, 1)
	entry := strings.Fields(b.Client.ZRange(ctx, queue, 0, 0).Val()[0])
	next := correctness.New(b.Client, correctness.WithAudit(false))
	defer next.Close()
	nextGot := wait(next)
	awaitQueue(t, b.Client, queue, 2)

	now := b.Client.Time(ctx).Val()
	msg := fmt.Sprintf("%s 999 %d %d", entry[4], now.Unix(), now.Nanosecond()/1000)
	if err := b.Client.Publish(ctx, entry[5], msg).Err(); err != nil {
		t.Fatal(err)
	}
	r := <-fooledGot
	if r.err != nil || r.lease.Token() != 999 {
		t.Fatalf("the fooled waiter: got %v, %v; want the forged token 999", r.lease, r.err)
	}
	proxy.HoldSubscriptions() // the real grant message is lost to the fooled Locker
	defer proxy.ReleaseHeld()
	if err := held.Release(ctx); err != nil { // hands the lock to the fooled entry
		t.Fatal(err)
	}
	awaitHeld(t, proxy, 1)
	if err := r.lease.Release(ctx); !errors.Is(err, correctness.ErrNotHeld) {
		t.Fatalf("the fooled waiter's release: got %v, want ErrNotHeld", err)
	}
	got := <-nextGot
	if got.err != nil {
		t.Fatalf("the next waiter: %v; want the lock once the fooled waiter's release ended the real grant to its entry, not its 30 s context's end (the ttl is a minute)", got.err)
	}
	defer got.lease.Release(ctx)
	if got.lease.Token() <= held.Token() {
		t.Fatalf("the next waiter's token %d, want above the holder's %d", got.lease.Token(), held.Token())
	}
}

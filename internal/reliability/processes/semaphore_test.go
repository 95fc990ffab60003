package processes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// checkPermitHeld is checkHeld for a permit of the semaphore called name.
func checkPermitHeld(ctx context.Context, c redis.UniversalClient, name, owner string, g grant) string {
	expiry, err := c.ZScore(ctx, scripts.PermitsKey(lease.DefaultPrefix, name), owner).Result()
	now, terr := c.Time(ctx).Result()
	switch {
	case err == nil && terr == nil && int64(expiry) > now.UnixMilli():
		return "held"
	case !time.Now().Before(g.Deadline()):
		return "lost"
	case err == redis.Nil:
		return "NOT HELD: no permit"
	case err != nil:
		return "unknown: " + err.Error()
	}
	return "NOT HELD: the permit has expired"
}

// TestKilledHolderPermitReturnsAtItsTTL: a holder process killed with -9
// never releases its permit; the permit frees itself at its ttl, not
// before, and a waiter takes it then, woken by its timer at the permit's
// expiry rather than by a recheck a second later.
func TestKilledHolderPermitReturnsAtItsTTL(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	const name, kind = "killed", "semaphore-2"
	permits := scripts.PermitsKey(lease.DefaultPrefix, name)
	parent := newLocker(kind, b.Client, &ownerLog{})
	defer parent.Close()
	if _, err := parent.Acquire(ctx, name, time.Minute); err != nil {
		t.Fatal(err)
	}
	child := proc.Start(t, "waiter", fmt.Sprintf("LEASEKIT_WAITER=%s %s %s 800ms", b.Server.Addr, kind, name))
	if got := child.Line(30 * time.Second); got != "acquired 0 held" {
		t.Fatalf("child: got %q, want its permit held", got)
	}
	first, err := b.Client.ZRangeWithScores(ctx, permits, 0, 0).Result()
	if err != nil || len(first) != 1 {
		t.Fatalf("permits: got %v, %v", first, err)
	}
	child.Kill()

	waiterClient := b.Server.Client(t)
	count := redistest.Count(waiterClient)
	waiter := newLocker(kind, waiterClient, &ownerLog{})
	defer waiter.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	g, err := waiter.Acquire(wctx, name, time.Minute)
	if err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	defer g.Release(ctx)
	now, err := b.Client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if now.UnixMilli() < int64(first[0].Score) {
		t.Fatalf("the waiter got a permit at %d ms, before the killed holder's expired at %v", now.UnixMilli(), first[0].Score)
	}
	if n := count.Of("sem_wait"); n > 3 {
		t.Fatalf("the waiter made %d attempts, want 2 (queue, then at the permit's expiry)", n)
	}
}

// TestSemaphoreWaitersThatGiveUpCostNoTTL is the stale-entry rule of
// TestWaitersThatGiveUpWhileRedisIsSlowCostNoTTL for permits: ten waiters
// give up while Redis is paused and cannot take their entries out of the
// queue; their permits would last ten minutes. Then five times a new waiter
// queues and a holder releases a permit: each new waiter must get it, which
// it could not if a waiter that had given up were handed the permit and kept
// it.
func TestSemaphoreWaitersThatGiveUpCostNoTTL(t *testing.T) {
	for _, mode := range []string{"deadline:2s", "cancel"} {
		t.Run(strings.TrimSuffix(mode, ":2s"), func(t *testing.T) { testSemaphoreGiveUp(t, mode) })
	}
}

func testSemaphoreGiveUp(t *testing.T, mode string) {
	b := redistest.Real(t)
	ctx := t.Context()
	const name, kind, waiters = "slow-permits", "semaphore-2", 10
	permits := scripts.PermitsKey(lease.DefaultPrefix, name)
	queue := scripts.QueueKey(permits)
	parent := newLocker(kind, b.Client, &ownerLog{})
	defer parent.Close()
	var holders [2]grant
	for i := range holders {
		g, err := parent.Acquire(ctx, name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		holders[i] = g
	}
	child := proc.Start(t, "give-up", fmt.Sprintf("LEASEKIT_GIVE_UP=%s %s %s %d %s 10m", b.Server.Addr, kind, name, waiters, mode))
	if got := child.Line(30 * time.Second); got != "queued" {
		t.Fatalf("child: got %q", got)
	}
	awaitQueue(t, b.Client, queue, waiters)
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
	if err := b.Client.Set(ctx, "after-the-pause", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for cycle := range 5 {
		client := b.Server.Client(t)
		count := redistest.Count(client)
		next := newLocker(kind, client, &ownerLog{})
		got := make(chan grant, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // far below the strays' ten minutes
			defer cancel()
			g, err := next.Acquire(wctx, name, time.Minute)
			if err != nil {
				t.Errorf("cycle %d: %v", cycle, err)
			}
			got <- g
		}()
		count.Await(t, "sem_wait", 1)
		i := cycle % 2
		if err := holders[i].Release(ctx); err != nil {
			t.Fatalf("cycle %d: release: %v", cycle, err)
		}
		holders[i] = <-got
		next.Close()
		if holders[i] == nil {
			t.FailNow()
		}
	}
	for _, g := range holders {
		if err := g.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Client.ZCard(ctx, permits).Val(); n != 0 {
		t.Fatalf("%d permits are left after every holder released: a waiter that had given up holds them", n)
	}
	child.Close()
}

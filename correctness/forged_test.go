package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// TestForgedGrantMessageCostsNoTTL: a grant message forged for a queued
// waiter makes it believe it holds the lock (until its first refresh finds
// another owner); its entry stays queued, and the holder's release hands
// the lock to it. Its Locker releases that grant at once, since the waiter
// left with another, and the next waiter gets the lock then, not a ttl
// later.
func TestForgedGrantMessageCostsNoTTL(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		holder, err := newLocker(t, b, correctness.WithAudit(false)).Acquire(ctx, "forged-grant", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			lease *correctness.Lease
			err   error
		}
		wait := func(l *correctness.Locker) chan result {
			c := make(chan result, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				lease, err := l.Acquire(wctx, "forged-grant", time.Minute)
				c <- result{lease, err}
			}()
			return c
		}
		fooled := wait(newLocker(t, b, correctness.WithAudit(false)))
		count.Await(t, "wait", 1)
		next := wait(newLocker(t, b, correctness.WithAudit(false)))
		count.Await(t, "wait", 2)

		queue := scripts.QueueKey(scripts.LockKey(lease.DefaultPrefix, "forged-grant"))
		first := b.Client.ZRange(ctx, queue, 0, 0).Val()
		f := strings.Fields(first[0])
		now := b.Client.Time(ctx).Val()
		forged := fmt.Sprintf("%s 999 %d %d", f[4], now.Unix(), now.Nanosecond()/1000)
		if err := b.Client.Publish(ctx, f[5], forged).Err(); err != nil {
			t.Fatal(err)
		}
		r := <-fooled
		if r.err != nil || r.lease.Token() != 999 {
			t.Fatalf("the waiter sent a forged grant: got %v, %v; want the forged token 999", r.lease, r.err)
		}
		// The holder's release hands the lock to the fooled waiter's entry;
		// its Locker releases it, and it goes on to the next waiter.
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		got := <-next
		if got.err != nil {
			t.Fatalf("the next waiter: %v, want the lock once the fooled waiter's Locker released it", got.err)
		}
		if err := r.lease.Refresh(ctx, time.Minute); !errors.Is(err, correctness.ErrNotHeld) {
			t.Fatalf("the fooled waiter's refresh: got %v, want ErrNotHeld", err)
		}
		_ = got.lease.Release(ctx)
	})
}

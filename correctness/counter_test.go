package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// corruptions are values a fence counter can be left holding by hand or by
// foreign code, none of which a token can be drawn from.
var corruptions = []struct {
	name  string
	value string // "" with list set: a LIST at the key
	list  bool
	says  string // what the error must say about it
}{
	{"text", "garbage", false, `holds "garbage"`},
	{"fraction", "1.5", false, `holds "1.5"`},
	{"empty", "", false, `holds ""`},
	{"leading space", " 7", false, `holds " 7"`},
	{"long text", strings.Repeat("x", 30), false, "not a fencing token"},
	{"largest int64", "9223372036854775807", false, "the largest token"},
	{"list", "", true, "another type"},
}

// options of every way a Locker draws tokens: the clock floor off, on, and on
// with an expiring counter.
var drawModes = map[string][]correctness.Option{
	"counter":          {correctness.WithClockFloor(false)},
	"clock floor":      nil,
	"expiring counter": {correctness.WithExpiringCounter(true)},
}

// TestCorruptCounter: a fence counter that holds something no token can be
// drawn from makes every acquire fail, with an error that matches
// ErrInvalidToken, names the counter's key and says what is wrong; whatever
// the clock floor; and the counter is left as it was.
func TestCorruptCounter(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		for mode, opts := range drawModes {
			l := newLocker(t, b, append(opts, correctness.WithAudit(false))...)
			for _, c := range corruptions {
				name := fmt.Sprintf("corrupt-%s-%s", mode, c.name)
				fence := scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, name))
				if c.list {
					b.Client.RPush(ctx, fence, "x")
				} else {
					b.Client.Set(ctx, fence, c.value, 0)
				}
				_, err := l.TryAcquire(ctx, name, time.Minute)
				if !errors.Is(err, correctness.ErrInvalidToken) || !strings.Contains(err.Error(), fence) || !strings.Contains(err.Error(), c.says) {
					t.Errorf("%s, %s: TryAcquire: got %v, want ErrInvalidToken naming %s and saying %s", mode, c.name, err, fence, c.says)
				}
				if n := b.Client.Exists(ctx, scripts.LockKey(lease.DefaultPrefix, name)).Val(); n != 0 {
					t.Errorf("%s, %s: the lock was granted over a corrupt counter", mode, c.name)
				}
				if !c.list {
					if got := b.Client.Get(ctx, fence).Val(); got != c.value {
						t.Errorf("%s, %s: the counter now holds %q, want it left as %q", mode, c.name, got, c.value)
					}
				}
			}
		}
	})
}

// TestReleaseWithCorruptCounter: a holder whose lock has a waiter queued, and
// whose counter was corrupted meanwhile, still ends its own grant: the
// release succeeds and the lock is free, and the waiter, which cannot be
// handed a token, fails with the counter's error rather than wait.
func TestReleaseWithCorruptCounter(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		for _, c := range corruptions {
			name := "handoff-" + strings.ReplaceAll(c.name, " ", "-")
			fence := scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, name))
			count := redistest.Count(b.Client)
			l := newLocker(t, b, correctness.WithAudit(false))
			holder, err := l.TryAcquire(ctx, name, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a bound for a hang
				defer cancel()
				_, err := l.Acquire(wctx, name, time.Hour)
				waited <- err
			}()
			count.Await(t, "wait", 1)
			b.Client.Del(ctx, fence)
			if c.list {
				b.Client.RPush(ctx, fence, "x")
			} else {
				b.Client.Set(ctx, fence, c.value, 0)
			}
			if err := holder.Release(ctx); err != nil {
				t.Errorf("%s: Release: got %v, want the holder's grant ended", c.name, err)
			}
			if err := <-waited; !errors.Is(err, correctness.ErrInvalidToken) || !strings.Contains(err.Error(), fence) {
				t.Errorf("%s: the waiter: got %v, want ErrInvalidToken naming %s", c.name, err, fence)
			}
			if n := b.Client.Exists(ctx, scripts.LockKey(lease.DefaultPrefix, name), scripts.QueueKey(scripts.LockKey(lease.DefaultPrefix, name))).Val(); n != 0 {
				t.Errorf("%s: the lock or its queue is left behind", c.name)
			}
		}
	})
}

// TestExpiringCounter: with WithExpiringCounter a lock's counter expires with
// the lease that drew from it, so a program that locks ever new names does not
// grow Redis without bound; tokens still increase after it has expired (the
// clock floor); and the option needs the clock floor.
func TestExpiringCounter(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b, correctness.WithExpiringCounter(true), correctness.WithAudit(false))
		const ttl = 200 * time.Millisecond
		fence := scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, "order-1"))
		var last uint64
		for i := range 2 {
			lease, err := l.TryAcquire(ctx, "order-1", ttl)
			if err != nil {
				t.Fatal(err)
			}
			if lease.Token() <= last {
				t.Fatalf("grant %d: token %d, want above %d", i, lease.Token(), last)
			}
			last = lease.Token()
			if left := b.Client.PTTL(ctx, fence).Val(); left <= 0 || left > ttl {
				t.Fatalf("grant %d: the counter's ttl is %v, want it to expire with the %v lease", i, left, ttl)
			}
			if got, _ := strconv.ParseUint(b.Client.Get(ctx, fence).Val(), 10, 64); got != last {
				t.Fatalf("grant %d: the counter holds %d, want the token %d", i, got, last)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			b.Pass(ttl + 50*time.Millisecond)
			if n := b.Client.Exists(ctx, fence).Val(); n != 0 {
				t.Fatalf("grant %d: the counter outlived its lease", i)
			}
		}
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "clock floor") {
				t.Errorf("WithExpiringCounter without the clock floor: got panic %v, want one naming the clock floor", r)
			}
		}()
		correctness.New(b.Client, correctness.WithExpiringCounter(true), correctness.WithClockFloor(false))
	})
}

// TestExpiringCounterFollowsRefreshes: the counter of WithExpiringCounter
// lives as long as the lease that drew from it, refreshes included (Do
// refreshes the same way), so it never expires under a lease still held.
func TestExpiringCounterFollowsRefreshes(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b, correctness.WithExpiringCounter(true), correctness.WithAudit(false))
		fence := scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, "refreshed"))
		held, err := l.TryAcquire(ctx, "refreshed", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if err := held.Refresh(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if left := b.Client.PTTL(ctx, fence).Val(); left <= 300*time.Millisecond {
			t.Fatalf("counter ttl after a refresh to a minute: got %v, want it to follow the lease", left)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCounterAheadOfTheClock: with the clock floor, a fence counter more
// than an hour ahead of the server clock (a clock that ran fast and was set
// back, or a forged value) makes every acquire fail with ErrInvalidToken,
// naming the counter and saying to repair or delete it, rather than grant a
// token every fence refuses; the counter is left as it was. Without the
// clock floor tokens are not clock-based, and the counter goes on.
func TestCounterAheadOfTheClock(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		ahead := strconv.FormatInt(b.Client.Time(ctx).Val().Add(2*time.Hour).UnixMicro(), 10)
		for mode, opts := range drawModes {
			l := newLocker(t, b, append(opts, correctness.WithAudit(false))...)
			name := "ahead-" + strings.ReplaceAll(mode, " ", "-")
			fence := scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, name))
			b.Client.Set(ctx, fence, ahead, 0)
			lease, err := l.TryAcquire(ctx, name, time.Minute)
			if mode == "counter" {
				if n, _ := strconv.ParseUint(ahead, 10, 64); err != nil || lease.Token() != n+1 {
					t.Errorf("%s: TryAcquire: got %v, want the token after the counter", mode, err)
				}
				continue
			}
			if !errors.Is(err, correctness.ErrInvalidToken) || !strings.Contains(err.Error(), fence) ||
				!strings.Contains(err.Error(), "more than an hour ahead") || !strings.Contains(err.Error(), "repair or delete it") {
				t.Errorf("%s: TryAcquire: got %v, want ErrInvalidToken naming %s, more than an hour ahead", mode, err, fence)
			}
			if got := b.Client.Get(ctx, fence).Val(); got != ahead {
				t.Errorf("%s: the counter now holds %q, want it left as %q", mode, got, ahead)
			}
		}
	})
}

package gocronlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/leasekit/leasekit/cron/gocronlock"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// newLocker returns a gocronlock.Locker on its own efficiency.Locker, as a
// scheduler on its own machine would have.
func newLocker(t *testing.T, b *redistest.Backend, opts ...gocronlock.Option) *gocronlock.Locker {
	t.Helper()
	l := efficiency.New(b.Client)
	t.Cleanup(func() { _ = l.Close() })
	return gocronlock.New(l, opts...)
}

func lock(t *testing.T, l *gocronlock.Locker, key string) gocron.Lock {
	t.Helper()
	k, err := l.Lock(t.Context(), key)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = k.Unlock(context.Background()) })
	return k
}

func wantNotObtained(t *testing.T, l *gocronlock.Locker, key string) {
	t.Helper()
	k, err := l.Lock(t.Context(), key)
	if !errors.Is(err, efficiency.ErrNotObtained) || k != nil {
		t.Fatalf("Lock(%q): got %v, %v; want nil and ErrNotObtained", key, k, err)
	}
}

func TestLockIsExclusive(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		first, second := newLocker(t, b), newLocker(t, b)
		k := lock(t, first, "job")
		wantNotObtained(t, second, "job")
		wantNotObtained(t, first, "job") // another run on the same scheduler too
		lock(t, second, "other-job")
		if err := k.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})
}

func TestUnlockKeepsTheMinimumHold(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		const hold = time.Minute
		first, second := newLocker(t, b, gocronlock.WithMinHold(hold)), newLocker(t, b, gocronlock.WithMinHold(hold))
		if err := lock(t, first, "job").Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		// A scheduler whose clock is behind asks for the same tick: refused.
		wantNotObtained(t, second, "job")
		ttl, err := b.Client.PTTL(t.Context(), scripts.LockKey(lease.DefaultPrefix, "job")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > hold {
			t.Fatalf("ttl after Unlock: got %v, want in (0, %v]", ttl, hold)
		}
	})
}

func TestUnlockAfterTheMinimumHoldReleases(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		// Past the minimum hold the lease is kept half of it ahead and
		// refreshed every third: a margin of a sixth, which a loaded machine
		// must not be able to eat by starving the refreshes.
		const hold = 2 * time.Second
		first, second := newLocker(t, b, gocronlock.WithMinHold(hold)), newLocker(t, b, gocronlock.WithMinHold(hold))
		k := lock(t, first, "job")
		time.Sleep(hold + hold/3) // the job runs past the minimum hold
		if err := k.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if n := b.Client.Exists(t.Context(), scripts.LockKey(lease.DefaultPrefix, "job")).Val(); n != 0 {
			t.Fatalf("the lock is still there after Unlock past the minimum hold")
		}
		lock(t, second, "job")
	})
}

func TestLongRunKeepsTheLock(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		const hold = 2 * time.Second // a margin of a sixth for the refreshes: see above
		first, second := newLocker(t, b, gocronlock.WithMinHold(hold)), newLocker(t, b, gocronlock.WithMinHold(hold))
		k := lock(t, first, "job")
		time.Sleep(hold + hold/2) // past the first lease: only refreshes keep it
		wantNotObtained(t, second, "job")
		if err := k.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		lock(t, second, "job")
	})
}

func TestLostLeaseIsReported(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		var logs bytes.Buffer
		l := newLocker(t, b, gocronlock.WithMinHold(time.Minute),
			gocronlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		k := lock(t, l, "job")
		key := scripts.LockKey(lease.DefaultPrefix, "job")
		owner := b.Client.Get(t.Context(), key).Val()
		if err := b.Client.Del(t.Context(), key).Err(); err != nil {
			t.Fatal(err)
		}
		err := k.Unlock(t.Context())
		if !errors.Is(err, efficiency.ErrLockLost) {
			t.Fatalf("Unlock: got %v, want ErrLockLost", err)
		}
		if again := k.Unlock(t.Context()); !errors.Is(again, efficiency.ErrLockLost) {
			t.Fatalf("second Unlock: got %v, want ErrLockLost again", again)
		}
		if !strings.Contains(logs.String(), "lost") {
			t.Errorf("log: got %q, want the lost lease", logs.String())
		}
		if strings.Contains(logs.String(), owner) || strings.Contains(err.Error(), owner) {
			t.Errorf("the owner id %q was logged or returned", owner)
		}
	})
}

func TestBadInputIsAnError(t *testing.T) {
	b := redistest.Mini(t)
	if _, err := newLocker(t, b, gocronlock.WithMinHold(0)).Lock(t.Context(), "job"); !errors.Is(err, efficiency.ErrInvalidTTL) {
		t.Errorf("minimum hold 0: got %v, want ErrInvalidTTL", err)
	}
	if _, err := newLocker(t, b).Lock(t.Context(), ""); !errors.Is(err, efficiency.ErrInvalidKey) {
		t.Errorf("empty key: got %v, want ErrInvalidKey", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "nil efficiency.Locker") {
				t.Errorf("New(nil): got panic %v, want one that names the nil efficiency.Locker", r)
			}
		}()
		gocronlock.New(nil)
	}()
	var nilLocker *gocronlock.Locker
	if _, err := nilLocker.Lock(t.Context(), "job"); err == nil {
		t.Errorf("nil *Locker: got nil error")
	}
}

func TestHoldEndsWithLockContext(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		first, second := newLocker(t, b, gocronlock.WithMinHold(time.Minute)), newLocker(t, b, gocronlock.WithMinHold(time.Minute))
		ctx, cancel := context.WithCancel(t.Context())
		k, err := first.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		cancel() // the job was removed, or its scheduler is shutting down
		if err := k.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		// Ending the hold early still keeps the minimum hold.
		wantNotObtained(t, second, "job")
	})
}

package efficiency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/redistest"
)

func newLocker(t *testing.T, b *redistest.Backend, opts ...efficiency.Option) *efficiency.Locker {
	t.Helper()
	l := efficiency.New(b.Client, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestSingleWinner(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		wins := redistest.Race(t, 64, efficiency.ErrNotObtained, func() error {
			_, err := l.TryObtain(t.Context(), "race", time.Minute)
			return err
		})
		if wins != 1 {
			t.Fatalf("got %d winners, want 1", wins)
		}
	})
}

func TestMutualExclusion(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		const workers, cycles = 8, 250 // 2,000 Obtain/Release cycles on one key
		var inside, most atomic.Int32
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range cycles {
					lock, err := l.Obtain(t.Context(), "mutex", 10*time.Second)
					if err != nil {
						errs <- err
						return
					}
					now := inside.Add(1)
					for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
					}
					inside.Add(-1)
					if err := lock.Release(t.Context()); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("cycle: %v", err)
		}
		if got := most.Load(); got != 1 {
			t.Fatalf("got %d holders at once, want 1", got)
		}
	})
}

func TestForeignHands(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		stale, err := l.TryObtain(ctx, "foreign", 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		b.Pass(100 * time.Millisecond)
		holder, err := l.TryObtain(ctx, "foreign", time.Minute)
		if err != nil {
			t.Fatalf("TryObtain after expiry: %v", err)
		}
		before, err := b.Client.Get(ctx, holder.Key()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := stale.Refresh(ctx, time.Hour); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Errorf("stale Refresh: got %v, want ErrNotHeld", err)
		}
		if err := stale.Release(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Errorf("stale Release: got %v, want ErrNotHeld", err)
		}
		if _, err := stale.TTL(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Errorf("stale TTL: got %v, want ErrNotHeld", err)
		}
		after, err := b.Client.Get(ctx, holder.Key()).Result()
		if err != nil || after != before {
			t.Fatalf("holder's value: got %q (%v), want it unchanged", after, err)
		}
		if ttl := b.Client.PTTL(ctx, holder.Key()).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("holder's ttl: got %v, want within (0, 1m]", ttl)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatalf("holder Release: %v", err)
		}
	})
}

func TestRefreshExtends(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		lock, err := l.TryObtain(ctx, "refresh", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		first := lock.Deadline()
		b.Pass(700 * time.Millisecond)
		if err := lock.Refresh(ctx, time.Second); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if !lock.Deadline().After(first) {
			t.Errorf("Deadline after Refresh: got %v, want after %v", lock.Deadline(), first)
		}
		b.Pass(700 * time.Millisecond) // 1.4s after the grant: only the refresh keeps it
		if ttl, err := lock.TTL(ctx); err != nil || ttl <= 0 {
			t.Fatalf("TTL after refresh: got %v, %v, want > 0", ttl, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}

func TestExpired(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		lock, err := l.TryObtain(ctx, "expire", 20*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		b.Pass(60 * time.Millisecond)
		if err := lock.Refresh(ctx, time.Second); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Errorf("Refresh after expiry: got %v, want ErrNotHeld", err)
		}
		if err := lock.Release(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Errorf("Release after expiry: got %v, want ErrNotHeld", err)
		}
		if n := b.Client.Exists(ctx, lock.Key()).Val(); n != 0 {
			t.Errorf("a failed Refresh created the key again")
		}
	})
}

func TestObtainWokenByRelease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b)
		holder, err := l.TryObtain(ctx, "wake", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// Without the wake-up, the waiter would wait out the holder's hour and
		// fail at this deadline.
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got := make(chan error, 1)
		go func() {
			lock, err := l.Obtain(wctx, "wake", time.Minute)
			if err == nil {
				err = lock.Release(ctx)
			}
			got <- err
		}()
		// The holder's grant, the waiter's probe, and its try once subscribed.
		count.Await(t, "acquire", 3)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if n := count.Of("acquire"); n != 4 {
			t.Fatalf("acquire round trips: got %d, want 4 (grant, probe, subscribed try, woken try)", n)
		}
	})
}

func TestReleaseWakesOneWaiter(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b)
		holder, err := l.TryObtain(ctx, "one", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 5
		obtained := make(chan *efficiency.Lock, waiters)
		errs := make(chan error, waiters)
		for range waiters {
			go func() {
				lock, err := l.Obtain(ctx, "one", time.Hour)
				if err != nil {
					errs <- err
					return
				}
				obtained <- lock
			}()
		}
		// The grant, then each waiter's probe and its try once subscribed.
		count.Await(t, "acquire", 1+2*waiters)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-obtained
		// Each further release hands over to exactly one more waiter.
		for i := 1; i < waiters; i++ {
			if n := count.Of("acquire"); n != 1+2*waiters+i {
				t.Fatalf("after %d releases: got %d acquire round trips, want %d: a release woke more than one waiter", i, n, 1+2*waiters+i)
			}
			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case next = <-obtained:
			case err := <-errs:
				t.Fatal(err)
			}
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestObtainDeadline(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		if _, err := l.TryObtain(t.Context(), "deadline", time.Hour); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, err := l.Obtain(ctx, "deadline", time.Second)
		if !errors.Is(err, efficiency.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want ErrNotObtained and context.DeadlineExceeded", err)
		}
	})
}

func TestObtainAfterHolderExpires(t *testing.T) {
	b := redistest.Real(t)
	l := newLocker(t, b)
	if _, err := l.TryObtain(t.Context(), "ttl-fallback", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The holder never releases: only its ttl can end the wait.
	lock, err := l.Obtain(t.Context(), "ttl-fallback", time.Second)
	if err != nil {
		t.Fatalf("Obtain after the holder's ttl: %v", err)
	}
	_ = lock.Release(t.Context())
}

func TestDoCancelsOnLoss(t *testing.T) {
	cases := []struct {
		name  string
		steal func(ctx context.Context, b *redistest.Backend, key string) error
	}{
		{"deleted", func(ctx context.Context, b *redistest.Backend, key string) error {
			return b.Client.Del(ctx, key).Err()
		}},
		{"taken", func(ctx context.Context, b *redistest.Backend, key string) error {
			return b.Client.Set(ctx, key, "someone-else", time.Minute).Err()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				l := newLocker(t, b)
				key := "leasekit:{do-" + tc.name + "}"
				cause := make(chan error, 1)
				err := l.Do(t.Context(), "do-"+tc.name, 300*time.Millisecond, func(ctx context.Context) error {
					if err := tc.steal(ctx, b, key); err != nil {
						return err
					}
					<-ctx.Done()
					cause <- context.Cause(ctx)
					return ctx.Err()
				})
				if !errors.Is(err, efficiency.ErrLockLost) {
					t.Errorf("Do: got %v, want ErrLockLost", err)
				}
				if got := <-cause; !errors.Is(got, efficiency.ErrLockLost) {
					t.Errorf("fn's context cause: got %v, want ErrLockLost", got)
				}
			})
		})
	}
}

func TestHoldATriedLock(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		lock, err := l.TryObtain(ctx, "hold", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		err = lock.Hold(ctx, func(ctx context.Context) error {
			if err := b.Client.Del(ctx, lock.Key()).Err(); err != nil {
				return err
			}
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), efficiency.ErrLockLost) {
				return fmt.Errorf("cause %v, want ErrLockLost", context.Cause(ctx))
			}
			return nil
		})
		if !errors.Is(err, efficiency.ErrLockLost) {
			t.Fatalf("Hold with the key deleted: got %v, want ErrLockLost", err)
		}

		lock, err = l.TryObtain(ctx, "hold", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lock.Hold(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Hold: %v", err)
		}
		if n := b.Client.Exists(ctx, lock.Key()).Val(); n != 0 {
			t.Fatalf("Hold did not release the lock")
		}
		var none *efficiency.Lock
		if err := none.Hold(ctx, func(context.Context) error { return nil }); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Fatalf("nil Hold: got %v, want ErrNotHeld", err)
		}
	})
}

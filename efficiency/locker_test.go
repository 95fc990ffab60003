package efficiency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

func newLocker(t *testing.T, b *redistest.Backend, opts ...efficiency.Option) *efficiency.Locker {
	t.Helper()
	l := efficiency.New(b.Client, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newWakeLocker returns a Locker whose waiters do not queue for a direct
// handoff but wait for wake-ups and try again, as they do on a ClusterClient,
// a Ring or under WithReplicas: its client is not a *redis.Client.
func newWakeLocker(t *testing.T, b *redistest.Backend) *efficiency.Locker {
	t.Helper()
	l := efficiency.New(redistest.WakeOnly{Client: b.Client})
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// obtainInBackground obtains the lock called name for a minute in a goroutine,
// giving up after 30 seconds, runs check (if not nil) on it and releases it.
// The channel receives the first error, or nil.
func obtainInBackground(ctx context.Context, l *efficiency.Locker, name string, check func(*efficiency.Lock) error) <-chan error {
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		lock, err := l.Obtain(wctx, name, time.Minute)
		if err != nil {
			got <- err
			return
		}
		if check != nil {
			err = check(lock)
		}
		got <- errors.Join(err, lock.Release(ctx))
	}()
	return got
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
		// A lease that lapses on the server, whatever the load on this
		// machine: a minute long, then expired by hand.
		stale, err := l.TryObtain(ctx, "foreign", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		lapse(t, b, stale.Key())
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
		lock, err := l.TryObtain(ctx, "expire", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		lapse(t, b, lock.Key())
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

// TestObtainHandedOverByRelease: on a single server the release hands the lock
// to the queued waiter, which makes no round trip after it.
func TestObtainHandedOverByRelease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b)
		holder, err := l.TryObtain(ctx, "wake", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// Without the handoff, the waiter would wait out the holder's hour
		// and fail at obtainInBackground's deadline.
		got := obtainInBackground(ctx, l, "wake", func(lock *efficiency.Lock) error {
			// The lease is measured from before the grant: its deadline is
			// within a minute of now, never beyond.
			if d := time.Until(lock.Deadline()); d <= 0 || d > time.Minute {
				return fmt.Errorf("handed-over lease: deadline %v from now, want within (0, 1m]", d)
			}
			return nil
		})
		count.Await(t, "wait", 1) // the waiter's probe failed; it has queued
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if a, w := count.Of("acquire"), count.Of("wait"); a != 2 || w != 1 {
			t.Fatalf("got %d acquire and %d wait round trips, want 2 (grant, probe) and 1 (the try that queued): "+
				"a handoff costs the waiter no round trip", a, w)
		}
	})
}

// TestObtainWokenByRelease: where waiters do not queue, the release wakes one,
// which tries again.
func TestObtainWokenByRelease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newWakeLocker(t, b)
		holder, err := l.TryObtain(ctx, "wake", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// Without the wake-up, the waiter would wait out the holder's hour and
		// fail at obtainInBackground's deadline.
		got := obtainInBackground(ctx, l, "wake", nil)
		// The waiter's try once subscribed, after its probe.
		count.Await(t, "wait", 1)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
		if a, w := count.Of("acquire"), count.Of("wait"); a != 2 || w != 2 {
			t.Fatalf("got %d acquire and %d wait round trips, want 2 (grant, probe) and 2 (subscribed try, woken try)", a, w)
		}
	})
}

// TestReleaseHandsOverInArrivalOrder: each release hands the lock to the
// waiter that queued first, and no waiter makes a round trip to get it.
func TestReleaseHandsOverInArrivalOrder(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b)
		holder, err := l.TryObtain(ctx, "fifo", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 5
		type grant struct {
			arrival int
			lock    *efficiency.Lock
		}
		obtained := make(chan grant, waiters)
		errs := make(chan error, waiters)
		for i := range waiters {
			go func() {
				lock, err := l.Obtain(ctx, "fifo", time.Hour)
				if err != nil {
					errs <- err
					return
				}
				obtained <- grant{i, lock}
			}()
			count.Await(t, "wait", i+1) // queued before the next one starts
		}
		release := holder.Release
		for want := range waiters {
			if err := release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case g := <-obtained:
				if g.arrival != want {
					t.Fatalf("release %d went to waiter %d, want %d, the next in arrival order", want+1, g.arrival, want)
				}
				release = g.lock.Release
			case err := <-errs:
				t.Fatal(err)
			}
		}
		if err := release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count.Of("wait"); n != waiters {
			t.Fatalf("wait round trips: got %d, want %d, one per waiter: a handoff costs none", n, waiters)
		}
	})
}

// TestHandoffSkipsAVanishedWaiter: a waiter whose Locker no longer listens
// (its process died with its entry in the queue) is passed over at once.
func TestHandoffSkipsAVanishedWaiter(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b)
		holder, err := l.TryObtain(ctx, "ghost", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		queue := scripts.QueueKey(scripts.LockKey(lease.DefaultPrefix, "ghost"))
		ghost := "ghostghostghostghostgh 3600000 e ticket " + lease.DefaultPrefix + "grants:gone"
		if err := b.Client.ZAdd(ctx, queue, redis.Z{Score: 1, Member: ghost}).Err(); err != nil {
			t.Fatal(err)
		}
		got := obtainInBackground(ctx, l, "ghost", nil) // the ghost's hour would outlast its deadline
		count.Await(t, "wait", 1)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("the live waiter behind the vanished one: %v", err)
		}
		if n := b.Client.ZCard(ctx, queue).Val(); n != 0 {
			t.Fatalf("queue: got %d entries, want none left", n)
		}
	})
}

// TestWaiterThatGivesUpLeavesTheQueue: an Obtain that ends with its ctx takes
// its entry out of the queue, so no release hands it a lock it cannot use.
func TestWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b)
		holder, err := l.TryObtain(ctx, "leave", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := l.Obtain(wctx, "leave", time.Minute)
			got <- err
		}()
		count.Await(t, "wait", 1)
		queue := scripts.QueueKey(scripts.LockKey(lease.DefaultPrefix, "leave"))
		if n := b.Client.ZCard(ctx, queue).Val(); n != 1 {
			t.Fatalf("queue while waiting: got %d entries, want 1", n)
		}
		cancel()
		if err := <-got; !errors.Is(err, efficiency.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want ErrNotObtained and Canceled", err)
		}
		if n := b.Client.ZCard(ctx, queue).Val(); n != 0 {
			t.Fatalf("queue after the waiter gave up: got %d entries, want 0", n)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.Client.Exists(ctx, scripts.LockKey(lease.DefaultPrefix, "leave")).Val(); n != 0 {
			t.Fatal("the release handed the lock to the waiter that had left")
		}
	})
}

// TestReleaseWakesOneWaiter: where waiters do not queue, a release wakes one
// waiter per Locker, not all.
func TestReleaseWakesOneWaiter(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newWakeLocker(t, b)
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
		// Each waiter's try once subscribed, after its probe.
		count.Await(t, "wait", waiters)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var next *efficiency.Lock
		select {
		case next = <-obtained:
		case err := <-errs:
			t.Fatal(err)
		}
		// Each further release hands over to exactly one more waiter.
		for i := 1; i < waiters; i++ {
			if n := count.Of("wait"); n != waiters+i {
				t.Fatalf("after %d releases: got %d wait round trips, want %d: a release woke more than one waiter", i, n, waiters+i)
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
		if !errors.Is(err, efficiency.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `lock "deadline"`) {
			t.Fatalf("got %v, want ErrNotObtained and context.DeadlineExceeded, naming the lock", err)
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

// lapse makes the lease at key run out on the server now: its ttl set to a
// millisecond, and that millisecond let by.
func lapse(t *testing.T, b *redistest.Backend, key string) {
	t.Helper()
	if err := b.Client.PExpire(t.Context(), key, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	b.Pass(20 * time.Millisecond)
	if b.Client.Exists(t.Context(), key).Val() != 0 {
		t.Fatalf("%s outlived its lapse", key)
	}
}

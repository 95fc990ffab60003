package efficiency_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// queueWaiter starts an Obtain of name on its own Locker (so that closing
// that Locker makes its entry a dead one) and waits until it has queued.
// Its result arrives on the channel.
func queueWaiter(t *testing.T, b *redistest.Backend, ctx context.Context, name string, count *redistest.Counter, n int) (*efficiency.Locker, chan error) {
	t.Helper()
	l := efficiency.New(b.Client)
	t.Cleanup(func() { _ = l.Close() })
	done := make(chan error, 1)
	go func() {
		lock, err := l.Obtain(ctx, name, time.Minute)
		if err == nil {
			err = lock.Release(context.WithoutCancel(ctx))
		}
		done <- err
	}()
	count.Await(t, "wait", n)
	return l, done
}

// TestInspect: Inspect reads whether the lock is held, for how long, and
// how many live waiters queue for it (a waiter whose Locker is gone is not
// counted), changing nothing; bad names and closed Lockers fail as an
// acquire does, and a key of another type is an error naming it.
func TestInspect(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		count := redistest.Count(b.Client)
		if info, err := l.Inspect(ctx, "inspected"); err != nil || info != (efficiency.Info{}) {
			t.Fatalf("a free lock: got %+v, %v, want nothing held", info, err)
		}
		lock, err := l.TryObtain(ctx, "inspected", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.Inspect(ctx, "inspected")
		if err != nil || !info.Held || info.TTL <= 50*time.Second || info.TTL > time.Minute || info.Waiters != 0 {
			t.Fatalf("a held lock: got %+v, %v, want held, about a minute left, no waiters", info, err)
		}
		before, _ := b.Client.Get(ctx, scripts.LockKey(lease.DefaultPrefix, "inspected")).Result()
		gone, _ := queueWaiter(t, b, ctx, "inspected", count, 1)
		_, live := queueWaiter(t, b, ctx, "inspected", count, 2)
		if info, err := l.Inspect(ctx, "inspected"); err != nil || !info.Held || info.Waiters != 2 {
			t.Fatalf("two waiters queued: got %+v, %v, want 2 waiters", info, err)
		}
		_ = gone.Close() // its entry stays queued, with nobody to hear a grant
		// The server sees the closed subscription connection go at once,
		// but asynchronously.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			info, err := l.Inspect(ctx, "inspected")
			if err == nil && info.Waiters == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("one waiter's Locker closed: got %+v, %v, want 1 live waiter", info, err)
			}
		}
		if after, _ := b.Client.Get(ctx, scripts.LockKey(lease.DefaultPrefix, "inspected")).Result(); !strings.HasPrefix(after, before) {
			t.Fatalf("Inspect changed the lock's value")
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-live; err != nil {
			t.Fatalf("the live waiter: %v", err)
		}

		b.Client.RPush(ctx, scripts.LockKey(lease.DefaultPrefix, "listed"), "x")
		if _, err := l.Inspect(ctx, "listed"); err == nil || !strings.Contains(err.Error(), `key "leasekit:{listed}"`) {
			t.Fatalf("a list at the lock's key: got %v, want an error naming the key", err)
		}
		if _, err := l.Inspect(ctx, ""); !errors.Is(err, efficiency.ErrInvalidKey) {
			t.Fatalf("an empty name: got %v, want ErrInvalidKey", err)
		}
		closed := efficiency.New(b.Client)
		_ = closed.Close()
		if _, err := closed.Inspect(ctx, "inspected"); !errors.Is(err, efficiency.ErrClosed) {
			t.Fatalf("a closed Locker: got %v, want ErrClosed", err)
		}
	})
}

// logged is a slog handler that keeps what it is given, for a test to read.
type logged struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (g *logged) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.buf.Write(p)
	}), nil))
}

func (g *logged) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestBreak: Break ends a held lease at once and hands the lock to the
// first live waiter, as the holder's release would; the holder learns of it
// at its next refresh (Do's ctx ends with ErrLockLost) and its Release
// returns ErrNotHeld; the break is logged at WARN with the lock's name. A
// free lock is not broken.
// (Its metric and spans: telemetry.TestBreakTelemetry, in the reliability
// module.)
func TestBreak(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		var log logged
		operator := newLocker(t, b, efficiency.WithLogger(log.logger()))
		if broken, err := operator.Break(ctx, "broken"); err != nil || broken {
			t.Fatalf("a free lock: got %v, %v, want nothing broken", broken, err)
		}
		holder := newLocker(t, b)
		held, ended := make(chan *efficiency.Lock, 1), make(chan error, 1)
		go func() {
			lock, err := holder.Obtain(ctx, "broken", 600*time.Millisecond)
			if err != nil {
				ended <- err
				return
			}
			held <- lock
			ended <- lock.Hold(ctx, func(ctx context.Context) error {
				<-ctx.Done()
				return context.Cause(ctx)
			})
		}()
		lock := <-held
		count := redistest.Count(b.Client)
		_, waiter := queueWaiter(t, b, ctx, "broken", count, 1)
		if broken, err := operator.Break(ctx, "broken"); err != nil || !broken {
			t.Fatalf("a held lock: got %v, %v, want it broken", broken, err)
		}
		if err := <-waiter; err != nil {
			t.Fatalf("the waiter after the break: %v, want the lock", err)
		}
		if err := <-ended; !errors.Is(err, efficiency.ErrLockLost) {
			t.Fatalf("the broken holder's Hold: got %v, want ErrLockLost", err)
		}
		if err := lock.Release(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
			t.Fatalf("the broken holder's Release: got %v, want ErrNotHeld", err)
		}
		if got := log.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "lock=broken") {
			t.Fatalf("log: got %q, want a WARN naming the lock", got)
		}
	})
}

// TestSemaphoreInspect: Inspect reads a semaphore's limit, live permits and
// live waiters.
func TestSemaphoreInspect(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		s := l.Semaphore("inspected", 2)
		if info, err := s.Inspect(ctx); err != nil || info != (efficiency.SemaphoreInfo{}) {
			t.Fatalf("no permit live: got %+v, %v, want nothing", info, err)
		}
		for range 2 {
			if _, err := s.TryAcquire(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		count := redistest.Count(b.Client)
		other := efficiency.New(b.Client)
		defer other.Close()
		go func() { _, _ = other.Semaphore("inspected", 2).Acquire(ctx, time.Minute) }()
		count.Await(t, "sem_wait", 1)
		if info, err := s.Inspect(ctx); err != nil || info != (efficiency.SemaphoreInfo{Limit: 2, Held: 2, Waiters: 1}) {
			t.Fatalf("two permits and a waiter: got %+v, %v, want limit 2, 2 held, 1 waiter", info, err)
		}
	})
}

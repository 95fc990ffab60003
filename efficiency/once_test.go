package efficiency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestOnceAcrossReplicas(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		const replicas = 20
		const period = 2 * time.Second
		var runs, ranTrue atomic.Int32
		errs := make(chan error, replicas)
		tick := func() {
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range replicas {
				l := newLocker(t, b) // one Locker per replica, as in a fleet
				wg.Go(func() {
					<-start
					ran, err := l.Once(t.Context(), "nightly", period, func(context.Context) error {
						runs.Add(1)
						return nil
					})
					if err != nil {
						errs <- err
					}
					if ran {
						ranTrue.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
		}
		tick()
		if runs.Load() != 1 || ranTrue.Load() != 1 {
			t.Fatalf("first period: fn ran %d times, %d replicas reported ran; want 1 and 1", runs.Load(), ranTrue.Load())
		}
		// A replica whose timer fires late for the same tick still skips.
		late := newLocker(t, b)
		ran, err := late.Once(t.Context(), "nightly", period, func(context.Context) error { runs.Add(1); return nil })
		if ran || err != nil {
			t.Fatalf("late replica: got ran=%v err=%v, want false, nil", ran, err)
		}
		b.Pass(period + 100*time.Millisecond)
		tick()
		if runs.Load() != 2 || ranTrue.Load() != 2 {
			t.Fatalf("second period: fn ran %d times in all, want 2", runs.Load())
		}
		close(errs)
		for err := range errs {
			t.Errorf("Once: %v", err)
		}
	})
}

func TestOnceReturnsFnError(t *testing.T) {
	b := redistest.Mini(t)
	l := newLocker(t, b)
	boom := errors.New("boom")
	ran, err := l.Once(t.Context(), "failing", time.Minute, func(context.Context) error { return boom })
	if !ran || !errors.Is(err, boom) {
		t.Fatalf("got ran=%v err=%v, want true and fn's error", ran, err)
	}
}

func TestOnceKeepsLongRunAlive(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		other := newLocker(t, b)
		// Long enough that a loaded machine cannot starve the refreshes (every
		// period/3) past the lease's deadline: this checks that the lease is
		// kept, not how fast.
		const period = time.Second
		ran, err := l.Once(t.Context(), "long", period, func(ctx context.Context) error {
			// Run for two periods; every other replica must keep skipping.
			for range 2 {
				// Real time for the refresh goroutine; on miniredis, also move
				// key ttls, by less than any refreshed ttl (period/2 at least).
				time.Sleep(period)
				if b.Mini != nil {
					b.Mini.FastForward(period / 3)
				}
				if ran, err := other.Once(ctx, "long", period, func(context.Context) error { return nil }); ran || err != nil {
					return errors.New("another replica ran while the first was still running")
				}
			}
			return ctx.Err()
		})
		if !ran || err != nil {
			t.Fatalf("got ran=%v err=%v, want true, nil", ran, err)
		}
		// The long run ended past its period: the next tick may run at once.
		ran, err = other.Once(t.Context(), "long", period, func(context.Context) error { return nil })
		if !ran || err != nil {
			t.Fatalf("after the long run: got ran=%v err=%v, want true, nil", ran, err)
		}
	})
}

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

// TestOnceKeepsLongRunAlive runs fn for two periods: the lease must be kept
// alive past its period, every other replica skipping meanwhile, and the
// next tick runs once the long run ends. Past its period the lease is
// refreshed every period/3 to period/2, so a stall of more than period/6
// loses it: on a machine that loaded, the run is tried again with twice
// the period (up to 8 s), and a lease that is never kept alive still fails.
func TestOnceKeepsLongRunAlive(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		other := newLocker(t, b)
		for period := time.Second; ; period *= 2 {
			name := "long-" + period.String()
			err := onceTwoPeriods(t, b, l, other, name, period)
			if errors.Is(err, efficiency.ErrLockLost) && period < 8*time.Second {
				t.Logf("period %v: %v; trying again with twice the period", period, err)
				continue
			}
			if err != nil {
				t.Fatalf("period %v: %v", period, err)
			}
			// The long run ended past its period: the next tick may run at
			// once.
			ran, err := other.Once(t.Context(), name, period, func(context.Context) error { return nil })
			if !ran || err != nil {
				t.Fatalf("after the long run: got ran=%v err=%v, want true, nil", ran, err)
			}
			return
		}
	})
}

// onceTwoPeriods runs l.Once on name with a fn that runs for two periods,
// while other's Once must skip, and returns what went wrong.
func onceTwoPeriods(t *testing.T, b *redistest.Backend, l, other *efficiency.Locker, name string, period time.Duration) error {
	ran, err := l.Once(t.Context(), name, period, func(ctx context.Context) error {
		for range 2 {
			// Real time for the refresh goroutine; on miniredis, also move
			// key ttls, by less than any refreshed ttl (period/2 at least).
			time.Sleep(period)
			if b.Mini != nil {
				b.Mini.FastForward(period / 3)
			}
			if ran, err := other.Once(ctx, name, period, func(context.Context) error { return nil }); ran || err != nil {
				return fmt.Errorf("another replica ran (%v, %v) while the first was still running", ran, err)
			}
		}
		return ctx.Err()
	})
	if !ran {
		return fmt.Errorf("got ran=false err=%v, want the first Once to run", err)
	}
	return err
}

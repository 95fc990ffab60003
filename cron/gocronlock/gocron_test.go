package gocronlock_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/leasekit/leasekit/cron/gocronlock"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// skewedClock is a real clock that reads skew ahead of the others, as the
// clock of another machine would: gocron fires its jobs by it.
type skewedClock struct {
	clockwork.Clock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return c.Clock.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// TestThreeSchedulersRunEachTickOnce runs a job every two seconds for ten
// seconds on three gocron schedulers sharing one Redis, each on its own client
// and Locker, their clocks 100 ms apart (one behind, one exact, one ahead): far
// more than a job that takes microseconds, so without the minimum hold the
// later schedulers would find each tick released and run it again. Each tick
// (the scheduled second, by the clock of the scheduler that ran it) must run
// exactly once, and no tick between the first and the last may be skipped.
// The minimum hold, a second, leaves 900 ms on either side of the skew for a
// loaded machine to fire a scheduler late.
func TestThreeSchedulersRunEachTickOnce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		t.Parallel() // the two backends side by side: the test takes ten seconds
		if b.Mini != nil {
			runRedisClock(t, b)
		}
		const interval, minHold = 2 * time.Second, time.Second
		var mu sync.Mutex
		ranBy := map[int64][]int{} // tick (Unix second) -> schedulers that ran it
		var refused atomic.Int32
		var schedulers []gocron.Scheduler
		for i, skew := range []time.Duration{-100 * time.Millisecond, 0, 100 * time.Millisecond} {
			client := redis.NewClient(&redis.Options{Addr: b.Client.Options().Addr})
			t.Cleanup(func() { _ = client.Close() })
			locker := efficiency.New(client)
			t.Cleanup(func() { _ = locker.Close() })
			clock := skewedClock{Clock: clockwork.NewRealClock(), skew: skew}
			s, err := gocron.NewScheduler(
				gocron.WithClock(clock),
				gocron.WithDistributedLocker(gocronlock.New(locker, gocronlock.WithMinHold(minHold))),
			)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.NewJob(
				gocron.CronJob("*/2 * * * * *", true),
				gocron.NewTask(func() {
					tick := clock.Now().Truncate(interval).Unix()
					mu.Lock()
					ranBy[tick] = append(ranBy[tick], i)
					mu.Unlock()
				}),
				gocron.WithName("every-second"),
				gocron.WithEventListeners(gocron.AfterLockError(func(uuid.UUID, string, error) { refused.Add(1) })),
			)
			if err != nil {
				t.Fatal(err)
			}
			schedulers = append(schedulers, s)
		}
		for _, s := range schedulers {
			s.Start()
		}
		time.Sleep(10 * time.Second)
		for _, s := range schedulers {
			if err := s.Shutdown(); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}

		mu.Lock()
		defer mu.Unlock()
		ticks := slices.Sorted(func(yield func(int64) bool) {
			for tick := range ranBy {
				if !yield(tick) {
					return
				}
			}
		})
		if len(ticks) < 2 {
			t.Fatalf("got %d ticks in ten seconds, want several", len(ticks))
		}
		perScheduler := make([]int, 3)
		for i, tick := range ticks {
			if len(ranBy[tick]) != 1 {
				t.Errorf("tick %s ran on schedulers %v, want exactly one", time.Unix(tick, 0).Format(time.TimeOnly), ranBy[tick])
			}
			if step := int64(interval / time.Second); i > 0 && tick != ticks[i-1]+step {
				t.Errorf("ticks %s to %s were skipped everywhere",
					time.Unix(ticks[i-1]+step, 0).Format(time.TimeOnly), time.Unix(tick-step, 0).Format(time.TimeOnly))
			}
			for _, s := range ranBy[tick] {
				perScheduler[s]++
			}
		}
		if refused.Load() == 0 {
			t.Errorf("no scheduler was ever refused a lock: the schedulers did not contend")
		}
		t.Logf("%d ticks; runs per scheduler (behind, exact, ahead): %v; %d lock refusals", len(ticks), perScheduler, refused.Load())
	})
}

// runRedisClock moves miniredis's clock with the real one, so that keys
// expire as on a real server, until the test ends.
func runRedisClock(t *testing.T, b *redistest.Backend) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				b.Advance(now.Sub(last))
				last = now
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-stopped })
}

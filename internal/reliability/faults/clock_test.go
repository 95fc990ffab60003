package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// stepKind is a kind of lock a clock-step test holds: take waits for it
// while ctx lasts and returns its release.
type stepKind struct {
	name  string
	queue string // the lock's wait queue key, for name "step"
	take  func(t *testing.T, ctx context.Context, c *redis.Client) (func(context.Context) error, error)
}

var stepKinds = []stepKind{
	{"efficiency", scripts.QueueKey(lockKey("step")), func(t *testing.T, ctx context.Context, c *redis.Client) (func(context.Context) error, error) {
		l, err := effLocker(t, c).Obtain(ctx, "step", time.Minute)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}},
	{"correctness", scripts.QueueKey(lockKey("step")), func(t *testing.T, ctx context.Context, c *redis.Client) (func(context.Context) error, error) {
		cl := correctness.New(c, correctness.WithLogger(quiet), correctness.WithAudit(false))
		t.Cleanup(func() { cl.Close() })
		l, err := cl.Acquire(ctx, "step", time.Minute)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}},
	{"semaphore", scripts.QueueKey(scripts.PermitsKey(lease.DefaultPrefix, "step")), func(t *testing.T, ctx context.Context, c *redis.Client) (func(context.Context) error, error) {
		l, err := effLocker(t, c).Semaphore("step", 1).Acquire(ctx, time.Minute)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}},
}

// TestClockStepSpendsNoPatience: the first waiter in line has a 20 s
// deadline, the second none; the Redis server's wall clock steps 30 s
// forward (an NTP step), or back, while both wait. The holder's release
// hands the lock to the first waiter: its patience is its own to judge, and
// a step of the server's clock does not spend it (docs/waiting.md).
func TestClockStepSpendsNoPatience(t *testing.T) {
	for _, k := range stepKinds {
		for _, step := range []time.Duration{30 * time.Second, -30 * time.Second} {
			t.Run(fmt.Sprintf("%s/%v", k.name, step), func(t *testing.T) {
				srv, clock := redistest.StartWithClock(t)
				testStepSpendsNoPatience(t, srv.Client(t), k, func() { clock.Step(t, step) })
			})
		}
		t.Run(k.name+"/miniredis", func(t *testing.T) {
			b := redistest.Mini(t)
			testStepSpendsNoPatience(t, b.Client, k, func() { b.Mini.SetTime(time.Now().Add(30 * time.Second)) })
		})
	}
}

func testStepSpendsNoPatience(t *testing.T, c *redis.Client, k stepKind, step func()) {
	ctx := t.Context()
	release, err := k.take(t, ctx, c)
	if err != nil {
		t.Fatalf("holder: %v", err)
	}
	granted := make(chan int, 2)
	for i, patience := range []time.Duration{20 * time.Second, time.Minute} {
		go func() {
			wctx, cancel := context.WithTimeout(ctx, patience)
			defer cancel()
			end, err := k.take(t, wctx, c)
			if err != nil {
				t.Errorf("waiter %d: %v", i+1, err)
				granted <- -1
				return
			}
			granted <- i + 1
			_ = end(ctx)
		}()
		if !waitFor(10*time.Second, func() bool { return c.ZCard(ctx, k.queue).Val() == int64(i+1) }) {
			t.Fatalf("%d waiters queued after 10 s, want %d", c.ZCard(ctx, k.queue).Val(), i+1)
		}
	}
	step()
	if err := release(ctx); err != nil {
		t.Fatalf("holder's release: %v", err)
	}
	if first := <-granted; first != 1 {
		t.Errorf("waiter %d was granted first, want waiter 1, first in line", first)
	}
	<-granted
}

// effLocker is an efficiency Locker on c, closed when the test ends.
func effLocker(t *testing.T, c *redis.Client) *efficiency.Locker {
	l := efficiency.New(c, efficiency.WithLogger(quiet))
	t.Cleanup(func() { l.Close() })
	return l
}

// TestClockStepBackRevivesNoPermit: two permits of a semaphore of 2 expire,
// a third worker takes one, and the Redis server's clock steps 30 s back,
// which puts the expired permits' expiry in the future again. They must
// not count again: the semaphore holds at most 2 live permits, and the
// expired permits' holders learn they lost them.
func TestClockStepBackRevivesNoPermit(t *testing.T) {
	srv, clock := redistest.StartWithClock(t)
	c := srv.Client(t)
	ctx := t.Context()
	s := effLocker(t, c).Semaphore("revived", 2)
	var expired []*efficiency.Lock
	for range 2 {
		l, err := s.TryAcquire(ctx, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		expired = append(expired, l)
	}
	permits := scripts.PermitsKey(lease.DefaultPrefix, "revived")
	live := func() int64 {
		now := time.UnixMilli(c.Time(ctx).Val().UnixMilli())
		return c.ZCount(ctx, permits, fmt.Sprint(now.UnixMilli()+1), "+inf").Val()
	}
	if !waitFor(10*time.Second, func() bool { return live() == 0 }) {
		t.Fatal("the permits did not expire")
	}
	if _, err := s.TryAcquire(ctx, time.Minute); err != nil {
		t.Fatalf("a third worker: %v", err)
	}
	clock.Step(t, -30*time.Second)
	if n := live(); n > 1 {
		t.Errorf("after the step back: %d permits look live, want 1 (the expired ones count again)", n)
	}
	for i, l := range expired {
		if err := l.Refresh(ctx, time.Minute); err == nil {
			t.Errorf("expired permit %d: Refresh succeeded after the step back, want ErrNotHeld", i)
		}
	}
	if info, err := s.Inspect(ctx); err != nil || info.Held > 2 {
		t.Errorf("Inspect: %+v, %v: want at most 2 permits held", info, err)
	}
}

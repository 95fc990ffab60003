package leasetest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/leasetest"
)

func TestAdvanceMovesExpiryAndClockTogether(t *testing.T) {
	env := leasetest.New(t)
	l := env.Correctness()
	first, err := l.TryAcquire(t.Context(), "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(env.Now().UnixMicro()); first.Token() != want {
		t.Fatalf("token: got %d, want the frozen server clock in µs, %d", first.Token(), want)
	}
	env.Advance(time.Minute)
	if h := env.Holder("job"); h.Held {
		t.Fatalf("after Advance past the ttl: got %+v, want not held", h)
	}
	second, err := l.TryAcquire(t.Context(), "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if second.Token()-first.Token() != uint64(time.Minute/time.Microsecond) {
		t.Fatalf("tokens %d then %d: want them a minute of µs apart, as the clock moved", first.Token(), second.Token())
	}
}

func TestExpireAndSteal(t *testing.T) {
	cases := []struct {
		name   string
		fenced bool
	}{{"efficiency", false}, {"correctness", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := leasetest.New(t, leasetest.WithPrefix("app:"))
			ctx := t.Context()
			var release func() error
			var token uint64
			// The Env's Lockers use its prefix, which Holder, Steal and
			// Expire read.
			if tc.fenced {
				lease, err := env.Correctness().TryAcquire(ctx, "k", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				token, release = lease.Token(), func() error { return lease.Release(ctx) }
			} else {
				lock, err := env.Efficiency().TryObtain(ctx, "k", 30*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				release = func() error { return lock.Release(ctx) }
			}
			h := env.Holder("k")
			if !h.Held || h.TTL != 30*time.Second || h.Token != token {
				t.Fatalf("Holder: got %+v, want held for 30s with token %d", h, token)
			}
			newer, err := env.Steal("k")
			if err != nil {
				t.Fatal(err)
			}
			if tc.fenced && newer <= token {
				t.Fatalf("Steal: got token %d, want above %d", newer, token)
			}
			if h := env.Holder("k"); !h.Held || h.Token != newer || h.TTL != 30*time.Second {
				t.Fatalf("Holder after Steal: got %+v, want held with token %d for the old ttl", h, newer)
			}
			if err := release(); err == nil {
				t.Fatalf("Release after Steal: got nil, want not held")
			}
			if !env.Expire("k") || env.Holder("k").Held {
				t.Fatalf("Expire: want the lock gone")
			}
			if env.Expire("k") {
				t.Fatalf("Expire of a free lock: got true, want false")
			}
		})
	}
}

func TestStealOfAFreeLock(t *testing.T) {
	env := leasetest.New(t)
	if _, err := env.Steal("free"); err != nil {
		t.Fatal(err)
	}
	if h := env.Holder("free"); !h.Held || h.TTL != time.Minute {
		t.Fatalf("got %+v, want held for a minute", h)
	}
	l := efficiency.New(env.Client)
	defer l.Close()
	if _, err := l.TryObtain(t.Context(), "free", time.Second); !errors.Is(err, efficiency.ErrNotObtained) {
		t.Fatalf("got %v, want ErrNotObtained", err)
	}
}

// TestCorrectnessLockerWithoutAuditNoise: a correctness Locker from
// Env.Correctness logs nothing, where one from correctness.New logs the
// audit's three "could not verify" warnings (miniredis has no CONFIG or
// INFO), as does one whose audit the test turns back on.
func TestCorrectnessLockerWithoutAuditNoise(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(env *leasetest.Env, opts ...correctness.Option) *correctness.Locker
		want int
	}{
		{"Env.Correctness", (*leasetest.Env).Correctness, 0},
		{"audit turned back on", func(env *leasetest.Env, opts ...correctness.Option) *correctness.Locker {
			return env.Correctness(append(opts, correctness.WithAudit(true))...)
		}, 3},
		{"correctness.New", func(env *leasetest.Env, opts ...correctness.Option) *correctness.Locker {
			l := correctness.New(env.Client, opts...)
			t.Cleanup(func() { _ = l.Close() })
			return l
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := leasetest.New(t)
			var log bytes.Buffer
			l := tc.open(env, correctness.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
			for range 2 {
				lease, err := l.TryAcquire(t.Context(), "job", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if err := lease.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Count(log.String(), "\n"); got != tc.want {
				t.Fatalf("log lines over two acquires: got %d, want %d:\n%s", got, tc.want, log.String())
			}
		})
	}
}

// TestPermits: Permits reports the live permits soonest first and the
// limit; StealPermit takes the one that expires first from its holder;
// ExpirePermits ends them all; Advance expires them as Redis would.
func TestPermits(t *testing.T) {
	env := leasetest.New(t, leasetest.WithPrefix("app:"))
	ctx := t.Context()
	s := env.Efficiency().Semaphore("pool", 3)
	short, err := s.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	long, err := s.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := leasetest.Permits{Limit: 3, TTLs: []time.Duration{10 * time.Second, 30 * time.Second}}
	if got := env.Permits("pool"); !reflect.DeepEqual(got, want) {
		t.Fatalf("Permits: got %+v, want %+v", got, want)
	}
	if !env.StealPermit("pool") {
		t.Fatal("StealPermit: got false, want a permit taken")
	}
	if got := env.Permits("pool"); !reflect.DeepEqual(got, want) {
		t.Fatalf("Permits after StealPermit: got %+v, want %+v (the thief keeps the ttl)", got, want)
	}
	if err := short.Refresh(ctx, time.Minute); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Fatalf("the robbed holder's Refresh: got %v, want ErrNotHeld", err)
	}
	if err := long.Refresh(ctx, 30*time.Second); err != nil {
		t.Fatalf("the other holder's Refresh: %v", err)
	}
	if n := env.ExpirePermits("pool"); n != 2 {
		t.Fatalf("ExpirePermits: got %d, want 2", n)
	}
	if got := env.Permits("pool"); !reflect.DeepEqual(got, leasetest.Permits{}) {
		t.Fatalf("Permits after ExpirePermits: got %+v, want none", got)
	}
	if err := long.Release(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Fatalf("Release after ExpirePermits: got %v, want ErrNotHeld", err)
	}
	if env.StealPermit("pool") || env.ExpirePermits("pool") != 0 {
		t.Fatal("StealPermit or ExpirePermits of a semaphore with no permit reported one")
	}
	// A new limit is taken once none is live.
	one := env.Efficiency().Semaphore("pool", 1)
	if _, err := one.TryAcquire(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { _, err := one.Acquire(wctx, time.Second); gaveUp <- err }()
	for env.Permits("pool").Queued != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter: got %v, want Canceled", err)
	}
	if got := env.Permits("pool"); got.Limit != 1 || got.Queued != 0 {
		t.Fatalf("Permits after the waiter left: got %+v, want limit 1 and nobody queued", got)
	}
	env.Advance(2 * time.Second)
	if got := env.Permits("pool"); len(got.TTLs) != 0 {
		t.Fatalf("Permits after Advance past the ttl: got %+v, want none", got)
	}
}

// TestStealPermitStopsDo: Do cancels its function's context once its
// permit is stolen.
func TestStealPermitStopsDo(t *testing.T) {
	env := leasetest.New(t)
	err := env.Efficiency().Semaphore("imports", 4).Do(t.Context(), time.Second, func(ctx context.Context) error {
		env.StealPermit("imports")
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, efficiency.ErrLockLost) {
		t.Fatalf("got %v, want ErrLockLost", err)
	}
}

// TestControlsAndOperatorTools: Inspect agrees with the Env's controls
// (Holder, Expire, Steal), and a Break on miniredis ends the holder's Do:
// its ctx ends with ErrLockLost at its next refresh.
func TestControlsAndOperatorTools(t *testing.T) {
	env := leasetest.New(t)
	ctx := t.Context()
	l := env.Correctness()
	lease, err := l.TryAcquire(ctx, "operated", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Inspect(ctx, "operated")
	if h := env.Holder("operated"); err != nil || !info.Held || info.Token != h.Token || info.TTL != h.TTL {
		t.Fatalf("Inspect %+v, %v; Holder %+v: want them to agree", info, err, h)
	}
	env.Expire("operated")
	if info, err := l.Inspect(ctx, "operated"); err != nil || info.Held || info.Token != lease.Token() {
		t.Fatalf("after Expire: got %+v, %v, want free with the last token %d", info, err, lease.Token())
	}
	stolen, err := env.Steal("operated")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := l.Inspect(ctx, "operated"); err != nil || !info.Held || info.Token != stolen {
		t.Fatalf("after Steal: got %+v, %v, want held with the thief's token %d", info, err, stolen)
	}

	e := env.Efficiency()
	ended := make(chan error, 1)
	held := make(chan struct{})
	go func() {
		ended <- e.Do(ctx, "broken", 300*time.Millisecond, func(ctx context.Context) error {
			close(held)
			<-ctx.Done()
			return context.Cause(ctx)
		})
	}()
	<-held
	if broken, err := e.Break(ctx, "broken"); err != nil || !broken {
		t.Fatalf("Break: got %v, %v, want broken", broken, err)
	}
	if h := env.Holder("broken"); h.Held {
		t.Fatalf("after Break: Holder says %+v, want free", h)
	}
	if err := <-ended; !errors.Is(err, efficiency.ErrLockLost) {
		t.Fatalf("the broken holder's Do: got %v, want ErrLockLost", err)
	}
}

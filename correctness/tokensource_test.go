package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// source is a TokenSource in memory: tokens from 1000 up, per lock, and the
// floors it was given. fail, when set, is its error; hold, when set, is
// called before it answers (with the ctx it was given).
type source struct {
	mu     sync.Mutex
	next   map[string]uint64
	floors []uint64
	fail   error
	hold   func(ctx context.Context)
}

func (s *source) Token(ctx context.Context, name string, floor uint64) (uint64, error) {
	s.mu.Lock()
	fail, hold := s.fail, s.hold
	s.mu.Unlock()
	if hold != nil {
		hold(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.floors = append(s.floors, floor)
	if fail != nil {
		return 0, fail
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.next == nil {
		s.next = make(map[string]uint64)
	}
	s.next[name] += 1000
	return s.next[name], nil
}

func (s *source) set(fail error, hold func(context.Context)) {
	s.mu.Lock()
	s.fail, s.hold = fail, hold
	s.mu.Unlock()
}

// TestTokenSourceIssuesTheTokens: with WithTokens, a grant's token is the
// source's, not the Redis counter's (which the source gets as its floor);
// Redis stores it in the grant, so Inspect reports it and a refresh and a
// release of the lease find it; the next grant gets the source's next.
func TestTokenSourceIssuesTheTokens(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		src := &source{}
		l := newLocker(t, b, correctness.WithAudit(false), correctness.WithTokens(src))
		lease, err := l.TryAcquire(ctx, "drawn", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Token() != 1000 {
			t.Fatalf("token %d, want the source's 1000", lease.Token())
		}
		if len(src.floors) != 1 || src.floors[0] < 1e15 {
			t.Fatalf("floors %v, want one: the Redis counter's token (the server clock in µs)", src.floors)
		}
		stored, err := b.Client.Get(ctx, scripts.LockKey(scripts.DefaultPrefix, "drawn")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if p, err := scripts.ParseValue(stored, true); err != nil || p.Token != 1000 {
			t.Fatalf("Redis holds %q (%v), want a grant with token 1000", stored, err)
		}
		info, err := l.Inspect(ctx, "drawn")
		if err != nil || !info.Held || info.Token != 1000 {
			t.Fatalf("Inspect = %+v, %v; want held with token 1000", info, err)
		}
		if err := lease.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		next, err := l.TryAcquire(ctx, "drawn", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Release(ctx)
		if next.Token() != 2000 {
			t.Fatalf("next token %d, want the source's 2000", next.Token())
		}
	})
}

// TestTokenSourceHandoff: a waiter that a release hands the lock to draws
// its token from the source too, before Acquire returns, without a wait
// round trip of its own; the waiters get the lock in arrival order.
func TestTokenSourceHandoff(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		src := &source{}
		l := newLocker(t, b, correctness.WithAudit(false), correctness.WithTokens(src))
		holder, err := l.TryAcquire(ctx, "handed", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 3
		got := make([]chan *correctness.Lease, waiters)
		errs := make(chan error, waiters)
		for i := range waiters {
			got[i] = make(chan *correctness.Lease, 1)
			go func() {
				lease, err := l.Acquire(ctx, "handed", time.Hour)
				if err != nil {
					errs <- err
					return
				}
				got[i] <- lease
			}()
			count.Await(t, "wait", i+1)
		}
		last := holder
		for i := range waiters {
			tries := count.Of("wait")
			if err := last.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case lease := <-got[i]:
				if want := uint64(i+2) * 1000; lease.Token() != want {
					t.Fatalf("waiter %d: token %d, want the source's %d", i, lease.Token(), want)
				}
				last = lease
			case err := <-errs:
				t.Fatal(err)
			}
			if n := count.Of("wait"); n != tries {
				t.Fatalf("waiter %d made %d wait round trips, want 0: it was not handed the lock", i, n-tries)
			}
		}
		if err := last.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTokenSourceOutage: a source that fails fails the acquire with
// ErrNoToken, wrapping its error, and releases the grant: the lock is free
// at once, and a waiter it was handed to hands it on. A lease held before
// the outage is refreshed and released as usual.
func TestTokenSourceOutage(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		src := &source{}
		l := newLocker(t, b, correctness.WithAudit(false), correctness.WithTokens(src))
		held, err := l.TryAcquire(ctx, "held", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		down := errors.New("etcd is down")
		src.set(down, nil)
		_, err = l.TryAcquire(ctx, "outage", time.Minute)
		if !errors.Is(err, correctness.ErrNoToken) || !errors.Is(err, down) || errors.Is(err, correctness.ErrNotObtained) {
			t.Fatalf("TryAcquire with the source down: %v, want ErrNoToken wrapping its error", err)
		}
		if n, err := b.Client.Exists(ctx, scripts.LockKey(scripts.DefaultPrefix, "outage")).Result(); err != nil || n != 0 {
			t.Fatalf("the lock's key exists (%d, %v): the grant without a token was not released", n, err)
		}
		if err := held.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("a lease held before the outage: refresh: %v", err)
		}

		// A waiter handed the lock while the source is down.
		src.set(nil, nil)
		holder, err := l.TryAcquire(ctx, "outage", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		count := redistest.Count(b.Client)
		waited := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctx, "outage", time.Minute)
			waited <- err
		}()
		count.Await(t, "wait", 1)
		src.set(down, nil)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; !errors.Is(err, correctness.ErrNoToken) || !errors.Is(err, down) {
			t.Fatalf("Acquire handed the lock with the source down: %v, want ErrNoToken", err)
		}
		// A waiter whose own attempt finds the lock free (its Locker does
		// not queue: it is woken), with a source that times out: no Redis
		// failure to wait out either.
		src.set(nil, nil)
		wl := correctness.New(redistest.WakeOnly{Client: b.Client}, correctness.WithLogger(quiet), correctness.WithAudit(false), correctness.WithTokens(src))
		defer wl.Close()
		holder, err = wl.TryAcquire(ctx, "outage", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		woken := redistest.Count(b.Client)
		go func() {
			_, err := wl.Acquire(ctx, "outage", time.Minute)
			waited <- err
		}()
		woken.Await(t, "wait", 1) // the waiter sleeps
		timeout := fmt.Errorf("etcd: %w", context.DeadlineExceeded)
		src.set(timeout, nil)
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; !errors.Is(err, correctness.ErrNoToken) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a woken Acquire with the source timing out: %v, want ErrNoToken", err)
		}

		src.set(nil, nil)
		again, err := l.TryAcquire(ctx, "outage", time.Minute)
		if err != nil {
			t.Fatalf("after the outage, the lock is not free: %v", err)
		}
		if err := again.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatalf("a lease held before the outage: release: %v", err)
		}
	})
}

// TestTokenSourceSlowerThanTheLease: the source is called with a ctx that
// ends at the lease's deadline, and one that answers only then fails the
// acquire with ErrNoToken; one that answers after the lease ended anyway
// fails it with ErrLateGrant, and its token is stored nowhere.
func TestTokenSourceSlowerThanTheLease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		src := &source{}
		l := newLocker(t, b, correctness.WithAudit(false), correctness.WithTokens(src))
		const ttl = 200 * time.Millisecond
		src.set(nil, func(ctx context.Context) { <-ctx.Done() })
		_, err := l.TryAcquire(ctx, "slow", ttl)
		if !errors.Is(err, correctness.ErrNoToken) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a source that waits out its ctx: %v, want ErrNoToken and DeadlineExceeded", err)
		}
		key := scripts.LockKey(scripts.DefaultPrefix, "slow")
		src.set(nil, func(context.Context) { b.Client.Del(context.Background(), key) }) // the lease ends meanwhile
		_, err = l.TryAcquire(ctx, "slow", ttl)
		if !errors.Is(err, correctness.ErrLateGrant) {
			t.Fatalf("a source that answers after the lease ended: %v, want ErrLateGrant", err)
		}
		if n, err := b.Client.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Fatalf("the lock's key exists (%d, %v) after a late token", n, err)
		}
	})
}

// TestTokenSourceTerms: with WithTokens, an election's terms are the
// source's tokens, and Leader reports them.
func TestTokenSourceTerms(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		src := &source{}
		l := newLocker(t, b, correctness.WithAudit(false), correctness.WithTokens(src))
		for want := uint64(1000); want <= 2000; want += 1000 {
			err := l.Campaign(ctx, "elected", time.Minute, []byte("me"), func(ctx context.Context, term uint64) error {
				if term != want {
					t.Errorf("term %d, want the source's %d", term, want)
				}
				leader, err := l.Leader(ctx, "elected")
				if err != nil || leader.Term != want {
					t.Errorf("Leader = %+v, %v; want term %d", leader, err, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestTokenSourceAudit: with WithTokens, Audit's clock-floor check says the
// floor is not needed, even with WithClockFloor(false), which is a risk
// only for the Redis counter's tokens.
func TestTokenSourceAudit(t *testing.T) {
	b := redistest.Mini(t)
	for _, tc := range []struct {
		name string
		opts []correctness.Option
		want correctness.Status
	}{
		{"counter without the floor", []correctness.Option{correctness.WithClockFloor(false)}, correctness.StatusRisk},
		{"source without the floor", []correctness.Option{correctness.WithClockFloor(false), correctness.WithTokens(&source{})}, correctness.StatusOK},
	} {
		l := newLocker(t, b, append(tc.opts, correctness.WithAudit(false))...)
		fs, err := l.Audit(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range fs {
			if f.Check == "clock-floor" {
				found = true
				if f.Status != tc.want {
					t.Errorf("%s: clock-floor %v (%s), want %v", tc.name, f.Status, f.Detail, tc.want)
				}
			}
		}
		if !found {
			t.Errorf("%s: no clock-floor finding", tc.name)
		}
	}
}

package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

var quiet = slog.New(slog.DiscardHandler)

func newLocker(t *testing.T, b *redistest.Backend, opts ...correctness.Option) *correctness.Locker {
	t.Helper()
	l := correctness.New(b.Client, append([]correctness.Option{correctness.WithLogger(quiet)}, opts...)...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestTokensIncrease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		const workers, grants = 32, 10_000
		var mu sync.Mutex
		var tokens []uint64 // appended inside the critical section: grant order
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range grants / workers {
					lease, err := l.Acquire(t.Context(), "counter", 10*time.Second)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					tokens = append(tokens, lease.Token())
					mu.Unlock()
					if err := lease.Release(t.Context()); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("grant: %v", err)
		}
		if len(tokens) != grants/workers*workers {
			t.Fatalf("got %d grants, want %d", len(tokens), grants/workers*workers)
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("grant %d got token %d after %d: tokens must strictly increase", i, tokens[i], tokens[i-1])
			}
		}
		if floor := uint64(time.Now().Add(-time.Hour).UnixMicro()); tokens[0] < floor {
			t.Errorf("first token %d is below the server clock in µs (~%d): the clock floor did not apply", tokens[0], floor)
		}
	})
}

func TestTokensWithoutClockFloor(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b, correctness.WithClockFloor(false))
		var got []uint64
		for range 3 {
			lease, err := l.TryAcquire(t.Context(), "small", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, lease.Token())
			if err := lease.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if want := []uint64{1, 2, 3}; !slices.Equal(got, want) {
			t.Fatalf("got tokens %v, want %v", got, want)
		}
	})
}

func TestLeaseLifecycle(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		stale, err := l.TryAcquire(ctx, "life", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.TryAcquire(ctx, "life", time.Minute); !errors.Is(err, correctness.ErrNotObtained) {
			t.Fatalf("second TryAcquire: got %v, want ErrNotObtained", err)
		}
		// The stale lease lapses on the server, whatever the load here.
		b.Client.PExpire(ctx, stale.Key(), time.Millisecond)
		b.Pass(20 * time.Millisecond)
		holder, err := l.TryAcquire(ctx, "life", time.Minute)
		if err != nil {
			t.Fatalf("TryAcquire after expiry: %v", err)
		}
		if holder.Token() <= stale.Token() {
			t.Fatalf("got token %d after %d, want a greater one", holder.Token(), stale.Token())
		}
		if err := stale.Refresh(ctx, time.Hour); !errors.Is(err, correctness.ErrNotHeld) {
			t.Errorf("stale Refresh: got %v, want ErrNotHeld", err)
		}
		if err := stale.Release(ctx); !errors.Is(err, correctness.ErrNotHeld) {
			t.Errorf("stale Release: got %v, want ErrNotHeld", err)
		}
		if err := holder.Refresh(ctx, 2*time.Minute); err != nil {
			t.Errorf("Refresh: %v", err)
		}
		if ttl, err := holder.TTL(ctx); err != nil || ttl <= time.Minute {
			t.Errorf("TTL after Refresh: got %v, %v, want over 1m", ttl, err)
		}
		if err := holder.Release(ctx); err != nil {
			t.Errorf("Release: %v", err)
		}
		var none *correctness.Lease
		if none.Token() != 0 || !errors.Is(none.Release(ctx), correctness.ErrNotHeld) {
			t.Errorf("nil *Lease: want token 0 and ErrNotHeld")
		}
	})
}

func TestAcquireWaits(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b, correctness.WithAudit(false))
		holder, err := l.TryAcquire(ctx, "wait", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *correctness.Lease, 1)
		errs := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			lease, err := l.Acquire(wctx, "wait", time.Minute)
			if err != nil {
				errs <- err
				return
			}
			got <- lease
		}()
		count.Await(t, "wait", 1) // the waiter has probed, subscribed and queued
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case lease := <-got:
			if lease.Token() <= holder.Token() {
				t.Errorf("waiter's token %d, want above the holder's %d", lease.Token(), holder.Token())
			}
		case err := <-errs:
			t.Fatalf("waiter: %v", err)
		}
		dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		_, err = l.Acquire(dctx, "wait", time.Second)
		if !errors.Is(err, correctness.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past its deadline: got %v, want ErrNotObtained and DeadlineExceeded", err)
		}
	})
}

func TestDoPassesTokenAndCancelsOnLoss(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b)
		var seen uint64
		cause := make(chan error, 1)
		err := l.Do(t.Context(), "do", 300*time.Millisecond, func(ctx context.Context, token uint64) error {
			seen = token
			if err := b.Client.Del(ctx, "leasekit:{do}").Err(); err != nil {
				return err
			}
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil
		})
		if seen == 0 {
			t.Errorf("fn got token 0")
		}
		if !errors.Is(err, correctness.ErrLockLost) {
			t.Errorf("Do: got %v, want ErrLockLost", err)
		}
		if c := <-cause; !errors.Is(c, correctness.ErrLockLost) {
			t.Errorf("cause: got %v, want ErrLockLost", c)
		}
	})
}

func TestWithReplicasWithoutReplica(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		l := newLocker(t, b, correctness.WithReplicas(1, 100*time.Millisecond))
		_, err := l.TryAcquire(t.Context(), "replicated", time.Minute)
		if !errors.Is(err, correctness.ErrNotReplicated) {
			t.Fatalf("got %v, want ErrNotReplicated", err)
		}
		if n := b.Client.Exists(t.Context(), "leasekit:{replicated}").Val(); n != 0 {
			t.Fatalf("the unreplicated grant is still there")
		}
	})
}

func TestBadInput(t *testing.T) {
	b := redistest.Mini(t)
	l := newLocker(t, b)
	reg := correctness.NewRegister(b.Client)
	ctx := t.Context()
	noop := func(context.Context, uint64) error { return nil }
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"TryAcquire empty key", func() error { _, err := l.TryAcquire(ctx, "", time.Second); return err }, correctness.ErrInvalidKey},
		{"Acquire empty key", func() error { _, err := l.Acquire(ctx, "", time.Second); return err }, correctness.ErrInvalidKey},
		{"Do empty key", func() error { return l.Do(ctx, "", time.Second, noop) }, correctness.ErrInvalidKey},
		{"TryAcquire short ttl", func() error { _, err := l.TryAcquire(ctx, "k", time.Microsecond); return err }, correctness.ErrInvalidTTL},
		{"Acquire zero ttl", func() error { _, err := l.Acquire(ctx, "k", 0); return err }, correctness.ErrInvalidTTL},
		{"Do negative ttl", func() error { return l.Do(ctx, "k", -time.Second, noop) }, correctness.ErrInvalidTTL},
		{"Write token 0", func() error { return reg.Write(ctx, "r", 0, []byte("v")) }, correctness.ErrInvalidToken},
		{"Write empty resource", func() error { return reg.Write(ctx, "", 1, []byte("v")) }, correctness.ErrInvalidKey},
		{"Read empty resource", func() error { _, _, err := reg.Read(ctx, ""); return err }, correctness.ErrInvalidKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRoundTrips(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		reg := correctness.NewRegister(b.Client)
		// The first acquire runs the audit; the first call of each script
		// after a flush costs an extra EVAL. Warm both.
		lease, err := l.TryAcquire(ctx, "budget", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Write(ctx, "budget", lease.Token(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		count := redistest.Count(b.Client)
		lease, err = l.TryAcquire(ctx, "budget", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count.Total(); n != 2 {
			t.Fatalf("TryAcquire + Release: got %d round trips, want 2", n)
		}
		count.Reset()
		if err := reg.Write(ctx, "budget", lease.Token(), []byte("y")); err != nil {
			t.Fatal(err)
		}
		if n := count.Total(); n != 1 {
			t.Fatalf("Register.Write: got %d round trips, want 1", n)
		}
		count.Reset()
		if _, _, err := reg.Read(ctx, "budget"); err != nil {
			t.Fatal(err)
		}
		if n := count.Total(); n != 1 {
			t.Fatalf("Register.Read: got %d round trips, want 1", n)
		}
	})
}

// sameOwner yields the same owner id every time, as a resent acquire (a
// go-redis retry after a lost reply) carries the first call's owner id.
type sameOwner struct{}

func (sameOwner) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 7
	}
	return len(p), nil
}

func TestResentAcquireGetsTheSameToken(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b, correctness.WithOwnerSource(sameOwner{}))
		first, err := l.TryAcquire(ctx, "resent", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		again, err := l.Acquire(ctx, "resent", time.Minute)
		if err != nil || again.Token() != first.Token() {
			t.Fatalf("resent Acquire: got token %d, %v, want the same token %d", again.Token(), err, first.Token())
		}
		if c := b.Client.Get(ctx, "leasekit:{resent}:fence").Val(); c != strconv.FormatUint(first.Token(), 10) {
			t.Fatalf("counter: got %s, want %d: a resent acquire must not draw a token", c, first.Token())
		}
	})
}

func TestSpoiledAcquireLeavesNoGrant(t *testing.T) {
	cases := []struct {
		name  string
		fault redistest.Fault
		want  error
	}{
		{"lost reply", redistest.Fault{Err: io.ErrUnexpectedEOF}, io.ErrUnexpectedEOF},
		{"reply after the deadline", redistest.Fault{After: func() { time.Sleep(60 * time.Millisecond) }}, correctness.ErrLateGrant},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				l := newLocker(t, b, correctness.WithAudit(false))
				warm, err := l.TryAcquire(t.Context(), "warm", time.Second) // load the script: no NOSCRIPT below
				if err != nil {
					t.Fatal(err)
				}
				_ = warm.Release(t.Context())
				fault := tc.fault
				fault.Match = func(op string) bool { return op == "fenced_acquire" }
				redistest.Inject(b.Client, &fault)
				if _, err := l.TryAcquire(t.Context(), "spoiled", 20*time.Millisecond); !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if n := b.Client.Exists(t.Context(), "leasekit:{spoiled}").Val(); n != 0 {
					t.Fatalf("the unreported grant is still in Redis")
				}
			})
		})
	}
}

func TestHoldAnAcquiredLease(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		l := newLocker(t, b)
		lease, err := l.TryAcquire(ctx, "hold", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		var seen uint64
		err = lease.Hold(ctx, func(ctx context.Context, token uint64) error {
			seen = token
			if err := b.Client.Set(ctx, lease.Key(), "someone-else", time.Minute).Err(); err != nil {
				return err
			}
			<-ctx.Done()
			return nil
		})
		if seen != lease.Token() {
			t.Errorf("fn got token %d, want %d", seen, lease.Token())
		}
		if !errors.Is(err, correctness.ErrLockLost) {
			t.Fatalf("Hold with the lock taken: got %v, want ErrLockLost", err)
		}
		if v := b.Client.Get(ctx, lease.Key()).Val(); v != "someone-else" {
			t.Fatalf("Hold's release touched the new holder's key: %q", v)
		}
	})
}

// TestHandoffInArrivalOrderWithNewTokens: a release hands the lock to the
// waiters in the order they queued, each with a token above the last.
func TestHandoffInArrivalOrderWithNewTokens(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		count := redistest.Count(b.Client)
		l := newLocker(t, b, correctness.WithAudit(false))
		holder, err := l.TryAcquire(ctx, "fifo", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		const waiters = 4
		type grant struct {
			arrival int
			lease   *correctness.Lease
		}
		got := make(chan grant, waiters)
		errs := make(chan error, waiters)
		for i := range waiters {
			go func() {
				lease, err := l.Acquire(ctx, "fifo", time.Hour)
				if err != nil {
					errs <- err
					return
				}
				got <- grant{i, lease}
			}()
			count.Await(t, "wait", i+1)
		}
		last := holder
		for want := range waiters {
			if err := last.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case g := <-got:
				if g.arrival != want || g.lease.Token() <= last.Token() {
					t.Fatalf("handoff %d: waiter %d with token %d, want waiter %d with a token above %d",
						want+1, g.arrival, g.lease.Token(), want, last.Token())
				}
				last = g.lease
			case err := <-errs:
				t.Fatal(err)
			}
		}
		if err := last.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWithReplicasQueues: a WithReplicas waiter queues like any other, the
// release hands it the lock, and it confirms the handed grant with WAIT in a
// round trip of its own: with no replica that fails with ErrNotReplicated,
// and the grant is released; with one, the waiter holds the lock.
func TestWithReplicasQueues(t *testing.T) {
	t.Run("no replica", func(t *testing.T) {
		redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
			replicatedHandoff(t, b.Client, 100*time.Millisecond, correctness.ErrNotReplicated)
		})
	})
	t.Run("one replica", func(t *testing.T) {
		primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
		replica := redistest.Start(t, "--replicaof", "127.0.0.1", primary.Addr[len("127.0.0.1:"):])
		onReplica := replica.Client(t)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			info := onReplica.Info(t.Context(), "replication").Val()
			if strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the replica did not sync within 10s:\n%s", info)
			}
		}
		// WAIT returns as soon as the replica acknowledges: the timeout is a
		// bound for a loaded machine, not a wait.
		replicatedHandoff(t, primary.Client(t), 10*time.Second, nil)
	})
}

// replicatedHandoff queues a WithReplicas waiter behind a holder, releases
// the holder's lock, and checks the waiter's Acquire ends with want. wait is
// the waiter's WithReplicas timeout.
func replicatedHandoff(t *testing.T, client *redis.Client, wait time.Duration, want error) {
	ctx := t.Context()
	holders := correctness.New(client, correctness.WithAudit(false))
	t.Cleanup(func() { _ = holders.Close() })
	holder, err := holders.TryAcquire(ctx, "replicated", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	waiters := correctness.New(client, correctness.WithAudit(false), correctness.WithReplicas(1, wait))
	t.Cleanup(func() { _ = waiters.Close() })
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // the holder's hour outlasts it
		defer cancel()
		lease, err := waiters.Acquire(wctx, "replicated", time.Minute)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	for client.ZCard(ctx, "leasekit:{replicated}:queue").Val() != 1 {
		time.Sleep(time.Millisecond) // ends when it queues, or the test's deadline
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, want) {
		t.Fatalf("the WithReplicas waiter: got %v, want %v", err, want)
	}
	if n := client.Exists(ctx, "leasekit:{replicated}").Val(); n != 0 {
		t.Fatalf("the handed grant is still there")
	}
}

// TestNilClient: New, NewRegister and their Conn twins refuse a nil client
// where it is passed, with a panic that says so, rather than a nil
// dereference at first use.
func TestNilClient(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		call       func()
	}{
		{"New(nil)", "correctness: New: nil redis client", func() { correctness.New(nil) }},
		{"New((*redis.Client)(nil))", "correctness: New: nil redis client", func() { correctness.New((*redis.Client)(nil)) }},
		{"NewRegister(nil)", "correctness: NewRegister: nil redis client", func() { correctness.NewRegister(nil) }},
		{"NewConn(nil)", "correctness: NewConn: nil Conn", func() { correctness.NewConn(nil) }},
		{"NewRegisterConn(nil)", "correctness: NewRegisterConn: nil Conn", func() { correctness.NewRegisterConn(nil) }},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Errorf("%s: got panic %v, want %q", tc.name, r, tc.want)
				}
			}()
			tc.call()
		}()
	}
}

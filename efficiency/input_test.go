package efficiency_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

func TestBadInput(t *testing.T) {
	b := redistest.Mini(t)
	l := newLocker(t, b)
	ctx := t.Context()
	noop := func(context.Context) error { return nil }
	cases := []struct {
		name string
		key  string
		ttl  time.Duration
		want error
	}{
		{"empty key", "", time.Second, efficiency.ErrInvalidKey},
		{"hash tag breaker", "}x", time.Second, efficiency.ErrInvalidKey},
		{"zero ttl", "k", 0, efficiency.ErrInvalidTTL},
		{"sub-millisecond ttl", "k", 999 * time.Microsecond, efficiency.ErrInvalidTTL},
		{"negative ttl", "k", -time.Second, efficiency.ErrInvalidTTL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := map[string]func() error{
				"TryObtain": func() error { _, err := l.TryObtain(ctx, tc.key, tc.ttl); return err },
				"Obtain":    func() error { _, err := l.Obtain(ctx, tc.key, tc.ttl); return err },
				"Do":        func() error { return l.Do(ctx, tc.key, tc.ttl, noop) },
				"Once":      func() error { _, err := l.Once(ctx, tc.key, tc.ttl, noop); return err },
			}
			for op, call := range ops {
				if err := call(); !errors.Is(err, tc.want) {
					t.Errorf("%s: got %v, want %v", op, err, tc.want)
				}
			}
		})
	}
	lock, err := l.TryObtain(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Refresh(ctx, 0); !errors.Is(err, efficiency.ErrInvalidTTL) {
		t.Errorf("Refresh(0): got %v, want ErrInvalidTTL", err)
	}
}

func TestNilLock(t *testing.T) {
	var lock *efficiency.Lock
	ctx := t.Context()
	if err := lock.Release(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Errorf("Release: got %v, want ErrNotHeld", err)
	}
	if err := lock.Refresh(ctx, time.Second); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Errorf("Refresh: got %v, want ErrNotHeld", err)
	}
	if _, err := lock.TTL(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Errorf("TTL: got %v, want ErrNotHeld", err)
	}
	if lock.Key() != "" || !lock.Deadline().IsZero() {
		t.Errorf("Key, Deadline: got %q, %v, want zero values", lock.Key(), lock.Deadline())
	}
}

func TestOwnerSourceFailure(t *testing.T) {
	b := redistest.Mini(t)
	broken := errors.New("entropy gone")
	l := newLocker(t, b, efficiency.WithOwnerSource(iotest.ErrReader(broken)))
	if _, err := l.TryObtain(t.Context(), "k", time.Second); !errors.Is(err, broken) {
		t.Fatalf("got %v, want the source's error", err)
	}
	if n := b.Client.DBSize(t.Context()).Val(); n != 0 {
		t.Fatalf("got %d keys, want none: no lock may be granted without a strong owner id", n)
	}
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

// TestRecognisedGrantKeepsItsDeadline: an acquire that finds the key holding
// its own owner id (a resent acquire, or another Locker drawing the same ids
// from a shared source) must not report a Deadline that outlives the key:
// here the grant has 300 ms left and the caller asks for an hour. (TryObtain
// leaves the key's expiry as it is; a waiter's try restarts it.)
// TestQueuedWaiterWithALostReplyLeavesNoEntry: a waiter whose queueing tries
// take effect in Redis but whose replies are lost keeps trying until its
// context ends, then returns the error, and leaves neither its queue entry
// (which a release would hand the lock to) nor a grant behind.
// TestNilClient: New and NewConn refuse a nil client where it is passed,
// with a panic that says so, rather than a nil dereference at the first
// lock.
func TestNilClient(t *testing.T) {
	for name, client := range map[string]redis.UniversalClient{"nil": nil, "nil *redis.Client": (*redis.Client)(nil)} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "efficiency: New: nil redis client") {
					t.Errorf("New(%s): got panic %v, want one that names the nil client", name, r)
				}
			}()
			efficiency.New(client)
		}()
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "efficiency: NewConn: nil Conn") {
			t.Errorf("NewConn(nil): got panic %v, want one that names the nil Conn", r)
		}
	}()
	efficiency.NewConn(nil)
}

func TestZeroValuesAndOddOptions(t *testing.T) {
	b := redistest.Mini(t)
	ctx := t.Context()
	zero := &efficiency.Lock{}
	if err := zero.Release(ctx); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Errorf("zero Lock Release: got %v, want ErrNotHeld", err)
	}
	if err := zero.Hold(ctx, func(context.Context) error { return nil }); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Errorf("zero Lock Hold: got %v, want ErrNotHeld", err)
	}
	l := newLocker(t, b, efficiency.WithDriftFactor(math.NaN()))
	lock, err := l.TryObtain(ctx, "nan", 10*time.Second)
	if err != nil {
		t.Fatalf("TryObtain with a NaN drift factor: %v", err)
	}
	if left := time.Until(lock.Deadline()); left <= 0 || left > 10*time.Second {
		t.Fatalf("Deadline with a NaN drift factor: %v from now, want within the ttl", left)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Hold(ctx, func(context.Context) error { return nil }); !errors.Is(err, efficiency.ErrNotHeld) {
		t.Errorf("Hold after Release: got %v, want ErrNotHeld", err)
	}
}

package faults_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
)

// leaseTTL is the lease of the latency tests.
const leaseTTL = time.Second

// leaseDrift is their drift factor: a Deadline 52 ms before the lease's end.
// The default, 12 ms, is less than a busy 2-core machine can take to wake a
// goroutine (measured: 3.6 ms to spare once under load); a broken keepAlive
// is late by most of a second or more.
const leaseDrift = 0.05

// networkFault is a fault that keeps refreshes from being confirmed.
type networkFault struct {
	name   string
	inject func(*faultproxy.Proxy)
	heal   func(*faultproxy.Proxy)
}

var refreshFaults = []networkFault{
	{
		// The server gets each refresh and extends the key; the client hears
		// of it too late.
		name:   "delay",
		inject: func(p *faultproxy.Proxy) { p.Delay(2 * leaseTTL) },
		heal:   func(p *faultproxy.Proxy) { p.Delay(0) },
	},
	{
		// The server never gets a refresh: the key expires a ttl after the
		// grant.
		name:   "blackhole",
		inject: func(p *faultproxy.Proxy) { p.Blackhole(true) },
		heal:   func(p *faultproxy.Proxy) { p.Blackhole(false) },
	},
}

// clientModes are the two ways a go-redis client treats a context deadline
// during a read: the default ignores it and waits ReadTimeout (5 s in v9.23);
// ContextTimeoutEnabled honours it.
var clientModes = []struct {
	name            string
	contextTimeouts bool
}{
	{"default-client", false},
	{"context-timeouts", true},
}

// TestLeaseLostBeforeServerExpiry holds a lock with Do through a proxy, then
// delays every reply past the ttl or swallows every request. fn's context
// must be cancelled, with cause ErrLockLost, before the lease's last
// confirmed expiry on the server: a causal order, measured on the monotonic
// clock against the server's own PTTL taken when the fault began (no refresh
// was in flight then: the first comes ttl/3 after the grant). Under the delay
// the server does extend the key, but the client cannot know that in time,
// so the lease must end as last confirmed. On a loaded machine every
// goroutine may run late, so the check is relative: fn must see the
// cancellation within the drift margin of a timer the test set for the
// lease's deadline (the expiry less that margin) firing. Unloaded, that is
// before the expiry; after a stall that held both back, it is soon after
// the stall; a keepAlive that waits for the network is late by most of a
// second either way.
//
// Both client modes run: go-redis's default ignores a context's deadline
// during a read, and the lease must still end on time.
func TestLeaseLostBeforeServerExpiry(t *testing.T) {
	for _, k := range kinds {
		for _, f := range refreshFaults {
			for _, cm := range clientModes {
				t.Run(k.name+"/"+f.name+"/"+cm.name, func(t *testing.T) {
					t.Parallel()
					leaseLostBeforeExpiry(t, k, f, cm.contextTimeouts)
				})
			}
		}
	}
}

func leaseLostBeforeExpiry(t *testing.T, k kind, f networkFault, contextTimeouts bool) {
	srv, direct := startServer(t)
	p := newProxy(t, srv.Addr)
	l := k.open(t, proxiedClient(t, p, contextTimeouts), lockConfig{drift: leaseDrift})

	var (
		left      time.Duration // the key's PTTL when the fault began
		expiry    time.Time     // the server keeps the key at least until then
		cancelled time.Time
		cause     error
		ended     bool
		// margin is the lease's drift margin; a timer set for expiry less
		// margin sends when it fired on deadline.
		margin   = time.Duration(float64(leaseTTL)*leaseDrift) + 2*time.Millisecond
		deadline = make(chan time.Time, 1)
	)
	err := l.do(t.Context(), "slow", leaseTTL, func(ctx context.Context) error {
		f.inject(p)
		defer f.heal(p) // so that Do's release gets through
		asked := time.Now()
		var err error
		if left, err = direct.PTTL(ctx, lockKey("slow")).Result(); err != nil {
			return err
		}
		// PTTL is rounded down to the millisecond.
		expiry = asked.Add(left - time.Millisecond)
		time.AfterFunc(time.Until(expiry.Add(-margin)), func() { deadline <- time.Now() })
		watch := time.NewTimer(10 * time.Second)
		defer watch.Stop()
		select {
		case <-ctx.Done():
			cancelled, cause, ended = time.Now(), context.Cause(ctx), true
		case <-watch.C:
		}
		return nil
	})
	if left <= 0 {
		t.Fatalf("the key's PTTL when the fault began: got %v, want the lease live (Do: %v)", left, err)
	}
	if !ended {
		t.Fatalf("fn's context was not cancelled within 10s of the fault (Do: %v)", err)
	}
	if !errors.Is(cause, k.lockLost) {
		t.Errorf("fn's context cause: got %v, want ErrLockLost", cause)
	}
	if !errors.Is(err, k.lockLost) {
		t.Errorf("Do: got %v, want ErrLockLost", err)
	}
	fired := <-deadline
	if after := cancelled.Sub(fired); after >= margin {
		t.Fatalf("fn's context was cancelled %v after a timer set for the lease's deadline fired (%v late), %v after the last confirmed server-side expiry; want within the %v drift margin",
			after, fired.Sub(expiry.Add(-margin)), cancelled.Sub(expiry), margin)
	}
	t.Logf("cancelled at %v from the last confirmed server-side expiry, %v after a timer set for the lease's deadline fired (%v late)",
		cancelled.Sub(expiry), cancelled.Sub(fired), fired.Sub(expiry.Add(-margin)))
}

// TestLateGrantNotReported delays the acquire's reply past the ttl: by the
// time the client hears of the grant, the server may have handed the lock to
// another owner. TryObtain and TryAcquire must return an error, not a lease
// whose Deadline has already passed.
func TestLateGrantNotReported(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := startServer(t)
			p := newProxy(t, srv.Addr)
			l := k.open(t, proxiedClient(t, p, false), lockConfig{})
			p.Delay(leaseTTL * 3 / 2) // under go-redis's 5 s ReadTimeout: the reply does come
			g, err := l.try(t.Context(), "late", leaseTTL)
			p.Delay(0)
			if err == nil {
				_ = g.release(t.Context())
				t.Fatalf("got a lease with its Deadline %v from now, want an error: the reply came %v after the request, past the %v ttl", time.Until(g.deadline), leaseTTL*3/2, leaseTTL)
			}
			if !errors.Is(err, k.lateGrant) || errors.Is(err, k.notObtained) {
				t.Fatalf("late grant: got %v, want an error matching ErrLateGrant and not ErrNotObtained", err)
			}
			t.Logf("late grant: %v", err)
			// A 1 ms ttl, half of it the drift margin: the reply comes a
			// fraction of a millisecond late, and the error says by how much.
			p.Delay(time.Millisecond)
			_, err = l.try(t.Context(), "late-1ms", time.Millisecond)
			p.Delay(0)
			if err != nil && errors.Is(err, k.lateGrant) {
				_, after, _ := strings.Cut(err.Error(), "reply came ")
				by, perr := time.ParseDuration(strings.Fields(after + " x")[0])
				if perr != nil || by <= 0 {
					t.Fatalf("late grant with a 1ms ttl: got %q, want how late it came, above 0", err)
				}
			}
			if l.once == nil {
				return
			}
			// Once must not report a late grant as another caller's run:
			// the grant was released, and nobody runs fn for this period.
			p.Delay(leaseTTL * 3 / 2)
			ran, err := l.once(t.Context(), "late-once", leaseTTL, func(context.Context) error {
				t.Error("fn ran on a late grant")
				return nil
			})
			p.Delay(0)
			if ran || err == nil || !errors.Is(err, k.lateGrant) {
				t.Fatalf("Once on a late grant: got %v, %v, want false and an error matching ErrLateGrant", ran, err)
			}
		})
	}
}

// TestObtainGivesUpOnLateGrants: when every reply comes back after the lease
// deadline (a ttl shorter than the round trip), a waiting acquire releases
// each grant and gives up after a few, with ErrLateGrant, rather than grant
// and release in a loop until its context ends.
func TestObtainGivesUpOnLateGrants(t *testing.T) {
	const ttl = 100 * time.Millisecond
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := startServer(t)
			p := newProxy(t, srv.Addr)
			l := k.open(t, proxiedClient(t, p, false), lockConfig{})
			p.Delay(ttl * 3 / 2)
			// A bound on a hang, not a timing assertion: the acquire gives
			// up after a handful of delayed round trips.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			g, err := l.obtain(ctx, "late", ttl)
			p.Delay(0)
			switch {
			case err == nil:
				_ = g.release(t.Context())
				t.Fatalf("got a lease with its Deadline %v from now, want an error: every reply came after the ttl", time.Until(g.deadline))
			case ctx.Err() != nil:
				t.Fatalf("the acquire ran until its context ended (%v), want it to give up on late grants", err)
			case !errors.Is(err, k.lateGrant):
				t.Fatalf("got %v, want an error matching ErrLateGrant", err)
			}
			t.Logf("gave up: %v", err)
		})
	}
}

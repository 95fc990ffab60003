package faults_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/faultproxy"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// cuts is how many ambiguous replies each subtest injects.
const cuts = 25

// acquireModes are the two ways to acquire: one try, and waiting (efficiency
// then pipelines SET NX with GET and PTTL).
var acquireModes = []struct {
	name string
	get  func(locker) func(context.Context, string, time.Duration) (*grant, error)
}{
	{"try", func(l locker) func(context.Context, string, time.Duration) (*grant, error) { return l.try }},
	{"wait", func(l locker) func(context.Context, string, time.Duration) (*grant, error) { return l.obtain }},
}

// TestAmbiguousAcquire cuts the connection after each acquire reached the
// server and before its reply came back; go-redis retries on a fresh
// connection. The retried acquire must recognise the caller's own grant: the
// client never reports "not obtained" while the key holds its owner id, gets
// the grant the key holds, and, for correctness locks, the token the first
// attempt minted (the counter moved once) and never a lower one.
func TestAmbiguousAcquire(t *testing.T) {
	for _, k := range kinds {
		for _, m := range acquireModes {
			t.Run(k.name+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				ambiguousAcquire(t, k, m.get)
			})
		}
	}
}

func ambiguousAcquire(t *testing.T, k kind, get func(locker) func(context.Context, string, time.Duration) (*grant, error)) {
	ctx := t.Context()
	srv, direct := startServer(t)
	p := newProxy(t, srv.Addr)
	owners := &ownerSource{}
	acquire := get(k.open(t, proxiedClient(t, p, false), lockConfig{owners: owners}))
	const name = "ambiguous"
	isAcquire := k.acquireRequest(name)
	var last uint64
	for i := range cuts {
		var fired atomic.Bool
		p.CutAfterRequest(func(chunk []byte) bool {
			if !isAcquire(chunk) {
				return false
			}
			fired.Store(true)
			return true
		})
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		g, err := acquire(actx, name, time.Minute)
		cancel()
		owner, held := owners.Last(), value(t, direct, lockKey(name))
		switch {
		case !fired.Load():
			t.Fatalf("cut %d: the proxy saw no acquire to cut (acquire: %v)", i, err)
		case errors.Is(err, k.notObtained) && holds(held, owner):
			t.Fatalf("cut %d: got %v while the key holds the caller's owner id (%q), want the grant", i, err, held)
		case err != nil:
			t.Fatalf("cut %d: got %v, want the grant: the retried acquire must recognise the caller's own", i, err)
		case !holds(held, owner):
			t.Fatalf("cut %d: the key holds %q, want the caller's owner id %q", i, held, owner)
		}
		if k.fenced {
			last = checkRetriedToken(t, i, direct, name, held, g.token, last)
		}
		if err := g.release(ctx); err != nil {
			t.Fatalf("cut %d: release: %v", i, err)
		}
	}
}

// checkRetriedToken checks that a grant whose acquire was retried carries the
// token in the key, that the counter moved once, and that the token is above
// the one before. It returns the token.
func checkRetriedToken(t *testing.T, i int, direct *redis.Client, name, held string, token, last uint64) uint64 {
	t.Helper()
	p, _ := scripts.ParseValue(held, true)
	inKey := strconv.FormatUint(p.Token, 10)
	counter := value(t, direct, scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, name)))
	if want := strconv.FormatUint(token, 10); inKey != want || counter != want {
		t.Fatalf("cut %d: got token %d, the key holds %q and the counter %q, want all three equal (the retry must not mint a second token)", i, token, inKey, counter)
	}
	if token <= last {
		t.Fatalf("cut %d: got token %d after %d, want a greater one", i, token, last)
	}
	return token
}

// TestFailedAcquireLeavesNoGrant lets the caller's deadline pass while its
// acquire is on the way: the server grants the lock, the client gives up. The
// acquire must fail, and the key must not keep the caller's owner id (the
// library releases the grant it could not report, best effort), so the lock
// is not stuck for the whole ttl.
//
//   - deadline-before-retry: the proxy holds the acquire until the deadline
//     has passed, forwards it, and cuts the connection; go-redis's retry
//     finds the context done. Default client.
//   - deadline-during-read: the reply is delayed past the deadline, which a
//     client with ContextTimeoutEnabled turns into a read timeout; the
//     network recovers as the deadline hits.
func TestFailedAcquireLeavesNoGrant(t *testing.T) {
	variants := []struct {
		name            string
		contextTimeouts bool
		deadline        time.Duration
		// inject arranges for the acquire to be granted after ctx ends.
		inject func(ctx context.Context, p *faultproxy.Proxy, isAcquire func([]byte) bool) (heal func())
	}{
		{
			name:     "deadline-before-retry",
			deadline: 100 * time.Millisecond,
			inject: func(ctx context.Context, p *faultproxy.Proxy, isAcquire func([]byte) bool) func() {
				p.CutAfterRequest(func(chunk []byte) bool {
					if !isAcquire(chunk) {
						return false
					}
					<-ctx.Done()
					return true
				})
				return func() {}
			},
		},
		{
			name:            "deadline-during-read",
			contextTimeouts: true,
			deadline:        200 * time.Millisecond,
			inject: func(ctx context.Context, p *faultproxy.Proxy, _ func([]byte) bool) func() {
				p.Delay(600 * time.Millisecond)
				// The latency spike ends with the deadline, so that the
				// release of the grant, on a new connection, is not slowed
				// too. The acquire's reply was read before: it still waits
				// its 600 ms.
				stop := context.AfterFunc(ctx, func() { p.Delay(0) })
				return func() { stop() }
			},
		},
	}
	for _, k := range kinds {
		for _, v := range variants {
			t.Run(k.name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				srv, direct := startServer(t)
				p := newProxy(t, srv.Addr)
				owners := &ownerSource{}
				l := k.open(t, proxiedClient(t, p, v.contextTimeouts), lockConfig{owners: owners})
				ctx, cancel := context.WithTimeout(t.Context(), v.deadline)
				defer cancel()
				heal := v.inject(ctx, p, k.acquireRequest("deadline"))
				defer heal()
				g, err := l.try(ctx, "deadline", time.Minute)
				checkNoGrantLeft(t, direct, g, err, owners.Last())
			})
		}
	}
}

// checkNoGrantLeft asserts that the acquire failed after the server granted
// it, and that within a second the lock key does not hold owner. The lease
// lasts a minute: only a release can clear it that soon.
func checkNoGrantLeft(t *testing.T, direct *redis.Client, g *grant, err error, owner string) {
	t.Helper()
	if err == nil {
		_ = g.release(t.Context())
		t.Fatal("got a grant, want an error: the deadline passed before any reply")
	}
	if setCalls(t, direct) == 0 {
		t.Fatal("the server ran no SET, want the acquire to have reached it: else this test proves nothing")
	}
	key := lockKey("deadline")
	if !waitFor(time.Second, func() bool { return !holds(value(t, direct, key), owner) }) {
		t.Fatalf("the key holds %q a second after the acquire failed with %v, want the caller's grant released", value(t, direct, key), err)
	}
}

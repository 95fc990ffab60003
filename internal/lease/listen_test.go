package lease_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// grantChannels is the pattern of the grant channels of the tests' Cores
// (prefix "p:").
const grantChannels = "p:grants:*"

// kinds are the kinds of lock a Core takes, with and without fencing tokens:
// their probes differ (SET NX, the fenced acquire script).
var kinds = []struct {
	name string
	cfg  lease.Config
}{
	{"lock", lease.Config{Kind: "efficiency"}},
	{"fenced lock", lease.Config{Kind: "correctness", Fenced: true, ClockFloor: true}},
}

func newCore(t *testing.T, cfg lease.Config, client redis.UniversalClient) *lease.Core {
	t.Helper()
	cfg.Client, cfg.Prefix, cfg.Errors = client, "p:", lease.Errors{NotObtained: errNotObtained}
	c := lease.New(cfg)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newClient is a client of b of its own: no connection open yet, as in a
// fresh process.
func newClient(t *testing.T, b *redistest.Backend) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: b.Client.Options().Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// heldProbe is a go-redis hook that holds back the first command on a lock's
// key (a waiter's probe) until the server has a subscriber on a channel
// matching grantChannels, for at most a few seconds, and records whether it
// had one: whether the probe and the SUBSCRIBE were in flight together.
type heldProbe struct {
	admin    *redis.Client
	key      string
	once     sync.Once
	together atomic.Bool
	done     chan struct{} // closed once the probe went out
}

func (h *heldProbe) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *heldProbe) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if slices.Contains(cmd.Args(), any(h.key)) {
			h.once.Do(func() {
				defer close(h.done)
				h.together.Store(awaitSubscriber(ctx, h.admin, 5*time.Second))
			})
		}
		return next(ctx, cmd)
	}
}

func (h *heldProbe) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// awaitSubscriber reports whether a channel matching grantChannels has a
// subscriber on the server within limit: a bound for a subscription that
// never comes, not a timing assertion.
func awaitSubscriber(ctx context.Context, admin *redis.Client, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if len(admin.PubSubChannels(ctx, grantChannels).Val()) > 0 {
			return true
		}
	}
	return false
}

// TestFirstWaitSubscribesWhileItProbes: the first wait of a Core on one
// server subscribes its grant channel while its probe runs, not after it
// (docs/waiting.md): a hook holds the probe back until the server has the
// subscription. The waiter still queues only once subscribed, and is handed
// the lock by the holder's release.
func TestFirstWaitSubscribesWhileItProbes(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				holder, err := newCore(t, kind.cfg, b.Client).Try(ctx, "job", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				client := newClient(t, b)
				probe := &heldProbe{admin: b.Client, key: "p:{job}", done: make(chan struct{})}
				client.AddHook(probe)
				if err := handOver(t, b, newCore(t, kind.cfg, client), holder, "job"); err != nil {
					t.Fatalf("the waiter: got %v, want the lock handed over", err)
				}
				if !probe.together.Load() {
					t.Fatal("the grant channel was not subscribed while the probe was held back: got the SUBSCRIBE after the probe, want them in flight together")
				}
			})
		})
	}
}

// handOver has waiter wait for the lock called name, which holder holds,
// releases it once the waiter has queued, and returns what the waiter's
// Obtain (and its release) returned.
func handOver(t *testing.T, b *redistest.Backend, waiter *lease.Core, holder *lease.Held, name string) error {
	t.Helper()
	ctx := t.Context()
	got := make(chan error, 1)
	go func() {
		h, err := waiter.Obtain(ctx, name, time.Minute)
		if err == nil {
			err = h.Release(ctx)
		}
		got <- err
	}()
	for b.Client.ZCard(ctx, scripts.QueueKey("p:{"+name+"}")).Val() != 1 {
		time.Sleep(time.Millisecond)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return <-got
}

// countedDials is a go-redis hook that counts the connections its client
// dials.
type countedDials struct{ n atomic.Int32 }

func (d *countedDials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (d *countedDials) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d *countedDials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGrantedProbeKeepsTheSubscription: when the first wait's probe takes
// the lock, the subscription made meanwhile is not undone: the grant channel
// stays subscribed, and the Core's next wait neither dials nor subscribes
// before it queues. A Core closed right after such an acquire leaves no
// goroutine behind (the package's TestMain checks).
func TestGrantedProbeKeepsTheSubscription(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		client := newClient(t, b)
		dials := &countedDials{}
		client.AddHook(dials)
		c := newCore(t, lease.Config{Kind: "efficiency"}, client)
		h, err := c.Obtain(ctx, "free", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !awaitSubscriber(ctx, b.Client, 30*time.Second) {
			t.Fatal("the grant channel was not subscribed after a first wait whose probe took the lock")
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		before := dials.n.Load()
		holder, err := newCore(t, lease.Config{Kind: "efficiency"}, b.Client).Try(ctx, "free", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := handOver(t, b, c, holder, "free"); err != nil {
			t.Fatalf("the second wait: got %v, want the lock handed over", err)
		}
		if n := dials.n.Load() - before; n != 0 {
			t.Fatalf("the second wait dialled %d connections, want none: its Core is subscribed already", n)
		}
		if n := len(b.Client.PubSubChannels(ctx, grantChannels).Val()); n != 1 {
			t.Fatalf("grant channels subscribed: got %d, want the Core's one", n)
		}

		closing := newCore(t, lease.Config{Kind: "efficiency"}, newClient(t, b))
		h, err = closing.Obtain(ctx, "other", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := closing.Close(); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatalf("release after Close: %v", err)
		}
	})
}

package processes_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/proc"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// noExpiry are the keys leasekit writes without an expiry, each for a
// reason (docs/reliability.md): a lock's fence counter, the memory of the
// highest token granted, which the clock floor backs up but a lost counter
// would give back to an old holder; and a Register, the resource's value
// and its fence.
var noExpiry = []string{":fence", ":register"}

// featuresChild uses every feature of leasekit on the names in
// LEASEKIT_FEATURES ("addr role"): as "holder", it takes each (an
// efficiency and a correctness lock, a permit of a semaphore, an election's
// leadership, a Register write, a Once that keeps its lock for its period)
// and keeps them, printing "holding"; as "waiter", it waits in line for
// each; as "done", it takes and releases each (and sends a request through
// a FencingProxy with a Redis store), printing "done". The test
// kills a holder and a waiter with -9.
func featuresChild() int {
	f := strings.Fields(os.Getenv("LEASEKIT_FEATURES"))
	addr, role := f[0], f[1]
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	ctx := context.Background()
	e := efficiency.New(client)
	defer e.Close()
	c := correctness.New(client, correctness.WithAudit(false))
	defer c.Close()
	const ttl = time.Minute
	if role == "done" {
		for _, err := range []error{
			e.Do(ctx, "keys-e", ttl, func(context.Context) error { return nil }),
			c.Do(ctx, "keys-c", ttl, func(_ context.Context, token uint64) error {
				if err := correctness.NewRegister(client).Write(ctx, "keys-r", token, []byte("v")); err != nil {
					return err
				}
				return proxied(client, token)
			}),
			e.Semaphore("keys-s", 1).Do(ctx, ttl, func(context.Context) error { return nil }),
			c.Campaign(ctx, "keys-elect", ttl, []byte("v"), func(context.Context, uint64) error { return nil }),
		} {
			if err != nil {
				fmt.Println("error", err)
				return 1
			}
		}
		if _, err := e.Once(ctx, "keys-once", time.Second, func(context.Context) error { return nil }); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("done")
		return 0
	}
	held := make(chan struct{}, 4)
	block := func(ctx context.Context) error { held <- struct{}{}; <-ctx.Done(); return nil }
	go func() { _ = e.Do(ctx, "keys-e", ttl, block) }()
	go func() { _ = c.Do(ctx, "keys-c", ttl, func(ctx context.Context, _ uint64) error { return block(ctx) }) }()
	go func() { _ = e.Semaphore("keys-s", 1).Do(ctx, ttl, block) }()
	go func() {
		_ = c.Campaign(ctx, "keys-elect", ttl, []byte("v"), func(ctx context.Context, _ uint64) error { return block(ctx) })
	}()
	if role == "holder" {
		for range 4 {
			<-held
		}
		fmt.Println("holding")
	}
	select {}
}

// proxied sends one request with token through a FencingProxy that keeps
// its resources in Redis.
func proxied(client *redis.Client, token uint64) error {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	p := correctness.NewFencingProxy(ok, correctness.WithProxyStore(client))
	r := httptest.NewRequest(http.MethodPut, "/keys-proxy", nil)
	r.Header.Set(correctness.TokenHeader, strconv.FormatUint(token, 10))
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		return fmt.Errorf("proxy: %d %s", w.Code, w.Body)
	}
	return nil
}

// TestNoKeyOutlivesItsHolders: after the holders of every feature are gone,
// released, or killed -9 with a killed waiter queued behind them, every key
// leasekit left has an expiry that follows the lease it describes, but for
// the keys documented as kept (noExpiry): nothing else stays forever.
func TestNoKeyOutlivesItsHolders(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	env := func(role string) string { return "LEASEKIT_FEATURES=" + b.Server.Addr + " " + role }
	done := proc.Start(t, "features", env("done"))
	if l := done.Line(30 * time.Second); l != "done" {
		t.Fatalf("done: got %q", l)
	}
	holder := proc.Start(t, "features", env("holder"))
	if l := holder.Line(30 * time.Second); l != "holding" {
		t.Fatalf("holder: got %q", l)
	}
	waiter := proc.Start(t, "features", env("waiter"))
	for _, q := range []string{"leasekit:{keys-e}:queue", "leasekit:{keys-c}:queue", "leasekit:{keys-s}:permits:queue", "leasekit:{keys-elect}:queue"} {
		awaitQueue(t, b.Client, q, 1)
	}
	holder.Kill()
	waiter.Kill()

	var kept, forever []string
	iter := b.Client.Scan(ctx, 0, "leasekit:*", 100).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if ttl := b.Client.PTTL(ctx, key).Val(); ttl >= 0 {
			continue
		}
		if slices.ContainsFunc(noExpiry, func(suffix string) bool { return strings.HasSuffix(key, suffix) }) {
			kept = append(kept, key)
		} else {
			forever = append(forever, key)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kept without expiry, as documented: %v", kept)
	if len(forever) > 0 {
		t.Fatalf("keys without an expiry that no lease bounds: %v", forever)
	}
}

// Package cluster runs leasekit's locks, fences and waiting queues on Redis
// Clusters started by the test harness (three masters, with replicas where a
// test fails over), and its wake-ups on a Ring.
package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// spread returns names whose keys land on every master of the cluster.
func spread(t *testing.T, client *redis.ClusterClient, masters int) []string {
	t.Helper()
	seen := make(map[string]bool)
	var names []string
	for i := 0; len(seen) < masters || len(names) < 2*masters; i++ {
		if i > 10_000 {
			t.Fatalf("keys reached %d of %d masters", len(seen), masters)
		}
		name := fmt.Sprintf("job-%d", i)
		node, err := client.MasterForKey(t.Context(), scripts.LockKey(lease.DefaultPrefix, name))
		if err != nil {
			t.Fatal(err)
		}
		addr := node.Options().Addr
		if !seen[addr] || len(seen) == masters {
			seen[addr] = true
			names = append(names, name)
		}
	}
	return names
}

func TestClusterLocksAndFences(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t)
	ctx := t.Context()
	names := spread(t, client, 3)
	el := efficiency.New(client)
	defer el.Close()
	cl := correctness.New(client, correctness.WithAudit(false))
	defer cl.Close()
	reg := correctness.NewRegister(client)

	for _, name := range names {
		lock, err := el.TryObtain(ctx, name, time.Minute)
		if err != nil {
			t.Fatalf("efficiency TryObtain %s: %v", name, err)
		}
		if err := lock.Refresh(ctx, time.Minute); err != nil {
			t.Fatalf("efficiency Refresh %s: %v", name, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("efficiency Release %s: %v", name, err)
		}
		first, err := cl.TryAcquire(ctx, name, time.Minute)
		if err != nil {
			t.Fatalf("correctness TryAcquire %s: %v", name, err)
		}
		if err := reg.Write(ctx, name, first.Token(), []byte("first")); err != nil {
			t.Fatalf("Register.Write %s: %v", name, err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatalf("correctness Release %s: %v", name, err)
		}
		second, err := cl.Acquire(ctx, name, time.Minute)
		if err != nil {
			t.Fatalf("correctness Acquire %s: %v", name, err)
		}
		if second.Token() <= first.Token() {
			t.Fatalf("%s: token %d after %d", name, second.Token(), first.Token())
		}
		if err := reg.Write(ctx, name, second.Token(), []byte("second")); err != nil {
			t.Fatalf("Register.Write %s: %v", name, err)
		}
		if err := reg.Write(ctx, name, first.Token(), []byte("stale")); !errors.Is(err, correctness.ErrStaleToken) {
			t.Fatalf("%s: stale write: got %v, want ErrStaleToken", name, err)
		}
		_ = second.Release(ctx)
	}
}

func TestClusterSingleWinner(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t)
	l := correctness.New(client, correctness.WithAudit(false))
	defer l.Close()
	wins := redistest.Race(t, 64, correctness.ErrNotObtained, func() error {
		_, err := l.TryAcquire(t.Context(), "race", time.Minute)
		return err
	})
	if wins != 1 {
		t.Fatalf("got %d winners, want 1", wins)
	}
}

func TestClusterAuditAndReplicas(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t)
	l := correctness.New(client, correctness.WithAudit(false), correctness.WithReplicas(1, 50*time.Millisecond))
	defer l.Close()
	fs, err := l.Audit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]correctness.Status{"persistence": correctness.StatusRisk, "eviction": correctness.StatusOK, "replication": correctness.StatusOK}
	for _, f := range fs {
		if w, ok := want[f.Check]; ok {
			if f.Status != w {
				t.Errorf("%s: got %v (%s), want %v", f.Check, f.Status, f.Detail, w)
			}
			delete(want, f.Check)
		}
	}
	for check := range want {
		t.Errorf("the audit reported no %s finding", check)
	}
	// No master has a replica: WAIT, sent to the key's master, counts none.
	for _, name := range spread(t, client, 3) {
		if _, err := l.TryAcquire(t.Context(), name, time.Minute); !errors.Is(err, correctness.ErrNotReplicated) {
			t.Fatalf("%s: got %v, want ErrNotReplicated", name, err)
		}
	}
}

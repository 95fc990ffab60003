package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestClusterOperate: Inspect, Break and Proclaim, and a semaphore's
// Inspect, on keys of every master of a 3-master cluster: a waiter queued
// on its sharded grant channel is counted, and a break hands it the lock.
func TestClusterOperate(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	count := redistest.Count(client)
	el := efficiency.New(client)
	defer el.Close()
	cl := correctness.New(client, correctness.WithAudit(false))
	defer cl.Close()
	for i, name := range spread(t, client, 3) {
		if _, err := el.TryObtain(ctx, name, time.Minute); err != nil {
			t.Fatal(err)
		}
		waiter := efficiency.New(client)
		defer waiter.Close()
		got := make(chan error, 1)
		go func() {
			_, err := waiter.Obtain(ctx, name, time.Minute)
			got <- err
		}()
		count.Await(t, "wait", i+1)
		if info, err := el.Inspect(ctx, name); err != nil || !info.Held || info.Waiters != 1 {
			t.Fatalf("%s: Inspect: got %+v, %v, want held with a waiter", name, info, err)
		}
		if broken, err := el.Break(ctx, name); err != nil || !broken {
			t.Fatalf("%s: Break: got %v, %v", name, broken, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("%s: the waiter after the break: %v", name, err)
		}

		election := name + "-election"
		if err := cl.Campaign(ctx, election, time.Minute, []byte("a"), func(ctx context.Context, term uint64) error {
			return cl.Proclaim(ctx, election, term, []byte("b"))
		}); err != nil {
			t.Fatalf("%s: Campaign with Proclaim: %v", election, err)
		}
		if info, err := cl.Inspect(ctx, election); err != nil || info.Held || info.Token == 0 {
			t.Fatalf("%s: Inspect after the term: got %+v, %v, want free with the last token", election, info, err)
		}
		if _, err := el.Semaphore(name, 2).TryAcquire(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if info, err := el.Semaphore(name, 2).Inspect(ctx); err != nil || info != (efficiency.SemaphoreInfo{Limit: 2, Held: 1}) {
			t.Fatalf("%s: Semaphore.Inspect: got %+v, %v, want limit 2, 1 held", name, info, err)
		}
	}
}

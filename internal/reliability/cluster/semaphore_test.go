package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// TestClusterSemaphore: on every master, a semaphore of 2 grants two
// permits and refuses a third; a waiter queues on its Locker's sharded grant
// channel of the semaphore, subscribed on the semaphore's master, and a
// release hands it a permit with no round trip of its own; permits refresh
// and report their ttl there.
func TestClusterSemaphore(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t)
	ctx := t.Context()
	holders := efficiency.New(client)
	defer holders.Close()
	waiterClient := c.Client(t)
	count := redistest.Count(waiterClient)
	waiters := efficiency.New(waiterClient)
	defer waiters.Close()
	for _, name := range spread(t, client, 3) {
		s := holders.Semaphore(name, 2)
		var held []*efficiency.Lock
		for range 2 {
			lock, err := s.TryAcquire(ctx, holderTTL)
			if err != nil {
				t.Fatalf("%s: TryAcquire: %v", name, err)
			}
			held = append(held, lock)
		}
		if _, err := s.TryAcquire(ctx, holderTTL); !errors.Is(err, efficiency.ErrNotObtained) {
			t.Fatalf("%s: a third TryAcquire: got %v, want ErrNotObtained", name, err)
		}
		if err := held[0].Refresh(ctx, 2*holderTTL); err != nil {
			t.Fatalf("%s: Refresh: %v", name, err)
		}
		if ttl, err := held[0].TTL(ctx); err != nil || ttl <= holderTTL {
			t.Fatalf("%s: TTL after the refresh: got %v, %v", name, ttl, err)
		}
		tries := count.Of("sem_wait")
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, waitBound)
			defer cancel()
			lock, err := waiters.Semaphore(name, 2).Acquire(wctx, time.Minute)
			if err == nil {
				err = lock.Release(ctx)
			}
			got <- err
		}()
		count.Await(t, "sem_wait", tries+1) // queued
		if n := shardSubscribersOf(t, c, scripts.PermitsKey(lease.DefaultPrefix, name)); n != 1 {
			t.Fatalf("%s: %d sharded grant channels of the semaphore on its master, want 1", name, n)
		}
		if err := held[1].Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("%s: waiter: %v", name, err)
		}
		if n := count.Of("sem_wait"); n != tries+1 {
			t.Fatalf("%s: the waiter made %d sem_wait round trips, want 1: the release did not hand the permit over", name, n-tries)
		}
		if err := held[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := client.Exists(ctx, scripts.PermitsKey(lease.DefaultPrefix, name)).Val(); n != 0 {
			t.Fatalf("%s: permits left after every release", name)
		}
	}
}

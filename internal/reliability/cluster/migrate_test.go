package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// kind is one way to hold a resource: hold waits for it while ctx lasts and
// returns what ends the hold.
type kind struct {
	name string
	hold func(ctx context.Context, name string, ttl time.Duration) (end func(context.Context) error, err error)
}

// kinds are every kind of lock on client: both locks, an election's term, a
// semaphore's permit, and a correctness lease that writes its fenced
// register (whose key shares the lock's slot).
func kinds(t *testing.T, client *redis.ClusterClient) []kind {
	el := efficiency.New(client)
	t.Cleanup(func() { el.Close() })
	cl := correctness.New(client, correctness.WithAudit(false))
	t.Cleanup(func() { cl.Close() })
	reg := correctness.NewRegister(client)
	return []kind{
		{"efficiency", func(ctx context.Context, name string, ttl time.Duration) (func(context.Context) error, error) {
			l, err := el.Obtain(ctx, name, ttl)
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		}},
		{"correctness", func(ctx context.Context, name string, ttl time.Duration) (func(context.Context) error, error) {
			l, err := cl.Acquire(ctx, name, ttl)
			if err != nil {
				return nil, err
			}
			if err := reg.Write(ctx, name, l.Token(), []byte("v")); err != nil {
				_ = l.Release(ctx)
				return nil, fmt.Errorf("register write: %w", err)
			}
			return l.Release, nil
		}},
		{"semaphore", func(ctx context.Context, name string, ttl time.Duration) (func(context.Context) error, error) {
			l, err := el.Semaphore(name, 1).Acquire(ctx, ttl)
			if err != nil {
				return nil, err
			}
			return l.Release, nil
		}},
		{"election", func(ctx context.Context, name string, ttl time.Duration) (func(context.Context) error, error) {
			return campaign(ctx, cl, name, ttl)
		}},
	}
}

// campaign campaigns in the election called name, and returns once in
// office (or failed): its end makes fn return and waits for Campaign.
func campaign(ctx context.Context, cl *correctness.Locker, name string, ttl time.Duration) (func(context.Context) error, error) {
	inOffice := make(chan struct{})
	resign := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- cl.Campaign(ctx, name, ttl, []byte("me"), func(context.Context, uint64) error {
			close(inOffice)
			<-resign
			return nil
		})
	}()
	select {
	case <-inOffice:
	case err := <-done:
		if err == nil {
			err = errors.New("Campaign returned before taking office")
		}
		return nil, err
	}
	return func(context.Context) error { close(resign); return <-done }, nil
}

// TestMigratingSlotIsAWait: while a lock's slot is half-migrated (its lock
// key on the source, its other keys on the target), Redis refuses every
// script on keys of both sides with TRYAGAIN. For 3 s a holder's release and
// a waiter's acquire, of every kind, meet only that; both wait it out, and
// the waiter gets the lock once the slot has moved.
func TestMigratingSlotIsAWait(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t)
	for _, k := range kinds(t, client) {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			name := "half-" + k.name
			end, err := k.hold(ctx, name, 10*time.Second)
			if err != nil {
				t.Fatalf("holder: %v", err)
			}
			m := beginHalfMigration(t, c, name)
			acquired := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				end, err := k.hold(wctx, name, 10*time.Second)
				if err == nil {
					err = end(ctx)
				}
				acquired <- err
			}()
			time.Sleep(time.Second) // the waiter meets the half-migrated slot
			released := make(chan error, 1)
			go func() { released <- end(ctx) }()
			time.Sleep(2 * time.Second) // and so does the holder's release
			m.Finish(t)
			if err := <-released; err != nil {
				t.Errorf("the holder's release: %v", err)
			}
			if err := <-acquired; err != nil {
				t.Errorf("the waiter: %v", err)
			}
		})
	}
}

// beginHalfMigration starts moving the slot of the lock (or semaphore)
// called name to another master, and moves every key of the slot there but
// the lock's (or the permits'): a command on keys of both sides gets
// TRYAGAIN until the migration is finished.
func beginHalfMigration(t *testing.T, c *redistest.Cluster, name string) *redistest.Migration {
	t.Helper()
	lock := scripts.LockKey(lease.DefaultPrefix, name)
	slot := redistest.Slot(lock)
	m := c.BeginMigration(t, slot, otherMaster(t, c, slot))
	var others []string
	for _, key := range m.Keys(t) {
		if key != lock && key != scripts.PermitsKey(lease.DefaultPrefix, name) {
			others = append(others, key)
		}
	}
	m.MoveOnly(t, others...)
	return m
}

// halfMigrate moves the slot of the lock called name to another master,
// half-migrated for d on the way.
func halfMigrate(t *testing.T, c *redistest.Cluster, name string, d time.Duration) {
	t.Helper()
	m := beginHalfMigration(t, c, name)
	time.Sleep(d)
	m.Finish(t)
}

// TestMigrationsEveryFewSeconds: two contenders of every kind take and end
// their locks over and over for 40 s, while a slot of theirs moves to
// another master every 3 s (each kind's in turn), half-migrated for 500 ms
// on the way. No acquire, release or fenced write fails.
func TestMigrationsEveryFewSeconds(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	ks := kinds(t, client)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	held := make([]int, len(ks))
	failed := 0
	var mu sync.Mutex
	for i, k := range ks {
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					end, err := k.hold(wctx, "moving-"+k.name, 5*time.Second)
					cancel()
					if err == nil {
						time.Sleep(5 * time.Millisecond)
						err = end(context.WithoutCancel(ctx))
					}
					switch {
					case err == nil:
						mu.Lock()
						held[i]++
						mu.Unlock()
					case ctx.Err() == nil:
						mu.Lock()
						failed++
						mu.Unlock()
						select {
						case errs <- fmt.Errorf("%s: %w", k.name, err):
						default: // the first ones are enough to tell
						}
					}
				}
			})
		}
	}
	// One slot moves at a time, each kind's in turn: moves of several slots
	// at once can leave the nodes disagreeing for good (their config epochs
	// collide), which is the harness's trouble, not the locks'.
	moves := make([]int, len(ks))
	for i, deadline := 0, time.Now().Add(40*time.Second); time.Now().Before(deadline); i = (i + 1) % len(ks) {
		time.Sleep(3 * time.Second)
		name := "moving-" + ks[i].name
		halfMigrate(t, c, name, 500*time.Millisecond)
		moves[i]++
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, k := range ks {
		t.Logf("%s: %d holds through %d moves of its slot", k.name, held[i], moves[i])
		if held[i] == 0 {
			t.Errorf("%s: no hold completed", k.name)
		}
	}
	if failed > 0 {
		t.Errorf("%d failures", failed)
	}
}

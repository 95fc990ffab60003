package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// waitBound bounds every wait below: a bound for a hung test, far above the
// second within which a waiter must find a free lock, and far below the
// holders' ttl, which would otherwise end the waits.
const (
	waitBound = 20 * time.Second
	holderTTL = time.Minute
)

// TestClusterWaitersQueue: on every master, a waiter queues on its Locker's
// sharded grant channel of the lock, subscribed on the lock's master, and
// the holder's release hands the lock straight to it: the waiter makes no
// round trip after the one that queued it.
func TestClusterWaitersQueue(t *testing.T) {
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
		holder, err := holders.TryObtain(ctx, name, holderTTL)
		if err != nil {
			t.Fatal(err)
		}
		tries := count.Of("wait")
		got := obtainAsync(ctx, waiters, name)
		count.Await(t, "wait", tries+1) // queued
		if n := shardSubscribers(t, c, name); n != 1 {
			t.Fatalf("%s: %d sharded grant channels of the lock on its master, want 1", name, n)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("%s: waiter: %v", name, err)
		}
		if n := count.Of("wait"); n != tries+1 {
			t.Fatalf("%s: the waiter made %d wait round trips, want 1: the release did not hand the lock over", name, n-tries)
		}
	}
}

// obtainAsync obtains the lock called name in a goroutine, within waitBound,
// and releases it; the channel receives the error, or nil.
func obtainAsync(ctx context.Context, l *efficiency.Locker, name string) <-chan error {
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, waitBound)
		defer cancel()
		lock, err := l.Obtain(wctx, name, time.Minute)
		if err == nil {
			err = lock.Release(ctx)
		}
		got <- err
	}()
	return got
}

// shardSubscribers counts the sharded channels of the lock called name that
// have a subscriber on the master of its slot (as the cluster reports it
// now, not as a client's slot map may remember it).
func shardSubscribers(t *testing.T, c *redistest.Cluster, name string) int {
	t.Helper()
	return shardSubscribersOf(t, c, scripts.LockKey(lease.DefaultPrefix, name))
}

// shardSubscribersOf is shardSubscribers for the lock or semaphore whose key
// is key.
func shardSubscribersOf(t *testing.T, c *redistest.Cluster, key string) int {
	t.Helper()
	master := c.MasterOf(t, redistest.Slot(key)).Client(t)
	channels, err := master.PubSubShardChannels(t.Context(), escapeGlob(key)+":grants:*").Result()
	if err != nil {
		t.Fatalf("PUBSUB SHARDCHANNELS on %s: %v", master.Options().Addr, err)
	}
	return len(channels)
}

func escapeGlob(s string) string {
	return strings.NewReplacer("{", `\{`, "}", `\}`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}

// queue is a holder of one lock and waiters queued behind it in a known
// order, each with its own client and Locker, as processes would be.
type queue struct {
	name   string
	holder *efficiency.Lock
	order  chan int // the waiters' indexes, in the order they got the lock
	errs   chan error
	inside atomic.Int32 // holders right now: more than one is an overlap
	wg     sync.WaitGroup
}

// queueUp takes the lock called name and queues n waiters behind it, one
// after another, each once the one before is in the queue. Each waiter holds
// the lock for a moment and releases it.
func queueUp(t *testing.T, c *redistest.Cluster, name string, n int) *queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	t.Cleanup(cancel)
	admin := c.Client(t)
	holders := efficiency.New(admin)
	t.Cleanup(func() { _ = holders.Close() })
	q := &queue{name: name, order: make(chan int, n), errs: make(chan error, n)}
	var err error
	if q.holder, err = holders.TryObtain(ctx, name, holderTTL); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l := efficiency.New(c.Client(t))
		t.Cleanup(func() { _ = l.Close() })
		q.wg.Go(func() { q.wait(ctx, l, i) })
		awaitQueue(t, admin, name, i+1)
	}
	return q
}

// wait is waiter i: obtain, hold for a moment, release.
func (q *queue) wait(ctx context.Context, l *efficiency.Locker, i int) {
	lock, err := l.Obtain(ctx, q.name, time.Minute)
	if err != nil {
		q.errs <- fmt.Errorf("waiter %d: %w", i, err)
		return
	}
	if q.inside.Add(1) > 1 {
		q.errs <- fmt.Errorf("waiter %d: granted while another waiter held the lock", i)
	}
	q.order <- i
	time.Sleep(5 * time.Millisecond)
	q.inside.Add(-1)
	if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
		q.errs <- fmt.Errorf("waiter %d: release: %w", i, err)
	}
}

// check releases the holder's lock and checks that every waiter got it in
// turn, in arrival order when fifo is set, with no two at once.
func (q *queue) check(t *testing.T, fifo bool) {
	t.Helper()
	if err := q.holder.Release(t.Context()); err != nil {
		t.Fatalf("holder's release: %v", err)
	}
	q.verify(t, fifo)
}

// verify checks that every waiter got the lock in turn, in arrival order
// when fifo is set, with no two at once.
func (q *queue) verify(t *testing.T, fifo bool) {
	t.Helper()
	q.wg.Wait()
	close(q.errs)
	close(q.order)
	for err := range q.errs {
		t.Error(err)
	}
	var order []int
	for i := range q.order {
		order = append(order, i)
	}
	for i, got := range order {
		if fifo && got != i {
			t.Errorf("grant order %v, want arrival order", order)
			break
		}
	}
}

// awaitQueue waits until the queue of the lock called name holds n entries.
func awaitQueue(t *testing.T, client *redis.ClusterClient, name string, n int) {
	t.Helper()
	key := scripts.QueueKey(scripts.LockKey(lease.DefaultPrefix, name))
	if !eventually(func() bool { return client.ZCard(t.Context(), key).Val() >= int64(n) }) {
		t.Fatalf("%s: the queue did not reach %d entries within %v", name, n, waitBound)
	}
}

// awaitSubscribers waits until n sharded grant channels of the lock called
// name have a subscriber on its slot's master.
func awaitSubscribers(t *testing.T, c *redistest.Cluster, name string, n int) {
	t.Helper()
	if !eventually(func() bool { return shardSubscribers(t, c, name) == n }) {
		t.Fatalf("%s: %d sharded grant channels on the slot's master after %v, want %d",
			name, shardSubscribers(t, c, name), waitBound, n)
	}
}

// eventually polls ok until it holds, at most waitBound.
func eventually(ok func() bool) bool {
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return ok()
}

// otherMaster returns a master that does not serve slot.
func otherMaster(t *testing.T, c *redistest.Cluster, slot int) *redistest.Server {
	t.Helper()
	owner := c.MasterOf(t, slot)
	for _, m := range c.Masters() {
		if m != owner {
			return m
		}
	}
	t.Fatal("no other master")
	return nil
}

// TestClusterQueueFollowsMigration: three waiters queue, and the lock's slot
// moves to another master. Their sharded subscriptions, which the server
// drops with the slot, are made again on the new master, and the handoff
// goes on there in arrival order. When the holder releases in the middle of
// the migration (its keys moved, the slot not yet), Redis refuses the
// release script with TRYAGAIN until the slot has moved, and the release
// tries again; the waiters get the lock one at a time.
func TestClusterQueueFollowsMigration(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	t.Run("moved", func(t *testing.T) {
		const name = "moved"
		q := queueUp(t, c, name, 3)
		slot := redistest.Slot(scripts.LockKey(lease.DefaultPrefix, name))
		c.MigrateSlot(t, slot, otherMaster(t, c, slot))
		awaitSubscribers(t, c, name, 3)
		q.check(t, true)
	})
	t.Run("half-moved", func(t *testing.T) {
		const name = "half-moved"
		q := queueUp(t, c, name, 3)
		slot := redistest.Slot(scripts.LockKey(lease.DefaultPrefix, name))
		m := c.BeginMigration(t, slot, otherMaster(t, c, slot))
		m.MoveKeys(t)
		released := make(chan error, 1)
		go func() { released <- q.holder.Release(t.Context()) }()
		time.Sleep(50 * time.Millisecond) // the release meets the migration
		m.Finish(t)
		if err := <-released; err != nil {
			t.Fatalf("holder's release: %v", err)
		}
		q.verify(t, false)
	})
	t.Run("source told first", func(t *testing.T) {
		// The source drops the waiters' subscriptions, and for a moment
		// it and the still-importing target redirect the slot to each
		// other: go-redis gives up after its redirects, and the waiters,
		// trying again at once, must ride that out as they ride out a
		// failover, not fail with MOVED.
		const name = "source-first"
		q := queueUp(t, c, name, 3)
		slot := redistest.Slot(scripts.LockKey(lease.DefaultPrefix, name))
		m := c.BeginMigration(t, slot, otherMaster(t, c, slot))
		m.FinishSourceFirst(t, 300*time.Millisecond)
		awaitSubscribers(t, c, name, 3)
		q.check(t, true)
	})
}

// TestClusterQueueAfterFailover: three waiters queue, and the lock's master
// fails over to its replica. The old master drops their sharded
// subscriptions as it steps down; they are made again on the new master, and
// the handoff goes on there in arrival order.
func TestClusterQueueAfterFailover(t *testing.T) {
	c := redistest.StartClusterWithReplicas(t, 3, 1)
	const name = "failover"
	q := queueUp(t, c, name, 3)
	slot := redistest.Slot(scripts.LockKey(lease.DefaultPrefix, name))
	c.Failover(t, c.MasterOf(t, slot))
	awaitSubscribers(t, c, name, 3)
	q.check(t, true)
}

// TestClusterWithoutShardedPubSub: a cluster that refuses SSUBSCRIBE as an
// unknown command, as Redis 6 does (here renamed away). The Locker says so
// once, its waiters wait for the wake-up instead, and the release wakes them.
func TestClusterWithoutShardedPubSub(t *testing.T) {
	c := redistest.StartClusterWith(t, 3, "--rename-command", "SSUBSCRIBE", "")
	client := c.Client(t)
	logs := &syncWriter{w: &bytes.Buffer{}}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	holders := efficiency.New(client)
	defer holders.Close()
	waiters := efficiency.New(c.Client(t), efficiency.WithLogger(logger))
	defer waiters.Close()
	for _, name := range spread(t, client, 3) {
		releaseToWaiter(t, holders, waiters, name, client, nil)
	}
	if n := strings.Count(logs.String(), "no sharded pub/sub"); n != 1 {
		t.Fatalf("the log says %d times that the cluster has no sharded pub/sub, want once:\n%s", n, logs.String())
	}
}

// releaseToWaiter takes the lock called name with holders and starts a
// waiter of waiters; once the waiter has marked the lock (read through
// client) and check, if not nil, has passed, it releases the lock, and the
// waiter must get it.
func releaseToWaiter(t *testing.T, holders, waiters *efficiency.Locker, name string, client redis.Cmdable, check func(key string)) {
	t.Helper()
	ctx := t.Context()
	holder, err := holders.TryObtain(ctx, name, holderTTL)
	if err != nil {
		t.Fatal(err)
	}
	got := obtainAsync(ctx, waiters, name)
	key := scripts.LockKey(lease.DefaultPrefix, name)
	if !eventually(func() bool { return strings.Contains(client.Get(ctx, key).Val(), "*") }) {
		t.Fatalf("%s: the waiter did not mark the lock", name)
	}
	if check != nil {
		check(key)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("%s: waiter: %v", name, err)
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// TestRingWaitersAreWoken: on a Ring of two shards, a waiter subscribes to
// the lock's wake-up channel on the lock's shard, where the release script
// publishes, and the release wakes it; the Locker says once that its waiters
// do not queue.
func TestRingWaitersAreWoken(t *testing.T) {
	addrs := map[string]string{"a": redistest.Start(t).Addr, "b": redistest.Start(t).Addr}
	ring := func() *redis.Ring {
		r := redis.NewRing(&redis.RingOptions{Addrs: addrs})
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	ctx := t.Context()
	holders := efficiency.New(ring())
	defer holders.Close()
	logs := &syncWriter{w: &bytes.Buffer{}}
	waiters := efficiency.New(ring(), efficiency.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	defer waiters.Close()
	shards := map[string]bool{}
	r := ring()
	for i := 0; len(shards) < 2; i++ {
		name := fmt.Sprintf("ring-%d", i)
		shard, err := r.GetShardClientForKey(scripts.LockKey(lease.DefaultPrefix, name))
		if err != nil {
			t.Fatal(err)
		}
		if shards[shard.Options().Addr] {
			continue
		}
		shards[shard.Options().Addr] = true
		releaseToWaiter(t, holders, waiters, name, shard, func(key string) {
			// Subscribed where the release publishes: without it, the
			// waiter would still find the lock free on its next check, a
			// second on.
			if n := shard.PubSubNumSub(ctx, key+":wake").Val()[key+":wake"]; n != 1 {
				t.Fatalf("%s: %d subscribers of the wake-up channel on the lock's shard, want 1", name, n)
			}
		})
	}
	if n := strings.Count(logs.String(), "waiters on a Ring do not queue"); n != 1 {
		t.Fatalf("the log says %d times that waiters on a Ring do not queue, want once:\n%s", n, logs.String())
	}
}

package efficiency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/leasetest"
	"github.com/redis/go-redis/v9"
)

// The examples run on an in-process miniredis from leasetest; point the
// client at your Redis instead.
func newClient() (*redis.Client, func()) {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	return env.Client, env.Close
}

func ExampleLocker_TryObtain() {
	client, done := newClient()
	defer done()
	locker := efficiency.New(client)
	defer locker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the work's own deadline
	defer cancel()

	lock, err := locker.TryObtain(ctx, "rebuild-cache", 10*time.Second)
	if errors.Is(err, efficiency.ErrNotObtained) {
		fmt.Println("another worker is on it")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	// Release on a short context of its own: by the time this runs, ctx may
	// have ended, and a Release that cannot reach Redis leaves the lock held
	// for its whole ttl.
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := lock.Release(ctx); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("released")
	}()

	fmt.Println("obtained", lock.Key())
	_, err = locker.TryObtain(ctx, "rebuild-cache", 10*time.Second)
	fmt.Println("second try:", err, errors.Is(err, efficiency.ErrTaken))
	// Output:
	// obtained leasekit:{rebuild-cache}
	// second try: efficiency: lock taken: lock "rebuild-cache" is held by another owner true
	// released
}

func ExampleLocker_Do() {
	client, done := newClient()
	defer done()
	locker := efficiency.New(client)
	defer locker.Close()

	err := locker.Do(context.Background(), "reindex", 30*time.Second, func(ctx context.Context) error {
		// The lease is refreshed every 10s while this runs. If it is lost,
		// ctx is cancelled with cause ErrLockLost: stop working then.
		fmt.Println("reindexing")
		return ctx.Err()
	})
	fmt.Println("done:", err)
	// Output:
	// reindexing
	// done: <nil>
}

func ExampleLocker_Once() {
	client, done := newClient()
	defer done()
	ctx := context.Background()

	// Three replicas of a service fire the same hourly job.
	for replica := 1; replica <= 3; replica++ {
		locker := efficiency.New(client)
		ran, err := locker.Once(ctx, "hourly-report", time.Hour, func(ctx context.Context) error {
			fmt.Println("replica", replica, "sends the report")
			return nil
		})
		fmt.Println("replica", replica, "ran:", ran, "err:", err)
		locker.Close()
	}
	// Output:
	// replica 1 sends the report
	// replica 1 ran: true err: <nil>
	// replica 2 ran: false err: <nil>
	// replica 3 ran: false err: <nil>
}

func ExampleLocker_Semaphore() {
	client, done := newClient()
	defer done()
	locker := efficiency.New(client)
	defer locker.Close()
	ctx := context.Background()

	// At most 2 imports at once, across every process sharing the Redis.
	imports := locker.Semaphore("imports", 2)
	var held []*efficiency.Lock
	for i := 1; i <= 3; i++ {
		permit, err := imports.TryAcquire(ctx, time.Minute)
		if err != nil {
			fmt.Println("import", i, "waits:", errors.Is(err, efficiency.ErrNotObtained))
			continue
		}
		fmt.Println("import", i, "runs")
		held = append(held, permit)
	}
	for _, permit := range held {
		_ = permit.Release(ctx)
	}

	// Do waits for a permit, keeps it while fn runs, and releases it.
	err := imports.Do(ctx, time.Minute, func(ctx context.Context) error {
		fmt.Println("import 3 runs")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// import 1 runs
	// import 2 runs
	// import 3 waits: true
	// import 3 runs
	// done: <nil>
}

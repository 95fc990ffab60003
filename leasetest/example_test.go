package leasetest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/leasetest"
)

// In a test, use leasetest.New(t); the Examples use Start and Close.

// A cron job deduplicated with Once runs once across three replicas, and
// again in the next period.
func Example_onceAcrossReplicas() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()

	runs := 0
	nightly := func(locker *efficiency.Locker) {
		_, _ = locker.Once(ctx, "nightly-report", 24*time.Hour, func(context.Context) error {
			runs++
			return nil
		})
	}
	var replicas []*efficiency.Locker
	for range 3 {
		l := efficiency.New(env.Client)
		defer l.Close()
		replicas = append(replicas, l)
	}

	for _, r := range replicas {
		nightly(r)
	}
	fmt.Println("runs after the first night:", runs)
	env.Advance(24 * time.Hour)
	for _, r := range replicas {
		nightly(r)
	}
	fmt.Println("runs after the second night:", runs)
	// Output:
	// runs after the first night: 1
	// runs after the second night: 2
}

// A worker holding a lock with Do stops when the lease is taken from it.
func Example_doStopsWhenStolen() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	locker := env.Efficiency() // closed with env

	err = locker.Do(context.Background(), "reindex", 300*time.Millisecond, func(ctx context.Context) error {
		if _, err := env.Steal("reindex"); err != nil { // as if we had paused past the ttl
			return err
		}
		<-ctx.Done() // the worker's loop would check ctx between steps
		fmt.Println("worker stopped:", errors.Is(context.Cause(ctx), efficiency.ErrLockLost))
		return nil
	})
	fmt.Println("Do reports the loss:", errors.Is(err, efficiency.ErrLockLost))
	// Output:
	// worker stopped: true
	// Do reports the loss: true
}

// A holder whose lease was superseded has its write rejected by the Register.
func Example_staleWriteRejected() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()
	locker := env.Correctness() // closed with env; no audit warnings about miniredis
	reg := correctness.NewRegister(env.Client)

	lease, err := locker.TryAcquire(ctx, "account-42", 10*time.Second)
	if err != nil {
		panic(err)
	}
	newer, err := env.Steal("account-42") // our holder paused; another took over
	if err != nil {
		panic(err)
	}
	if err := reg.Write(ctx, "account-42", newer, []byte("the new holder's balance")); err != nil {
		panic(err)
	}

	err = reg.Write(ctx, "account-42", lease.Token(), []byte("our stale balance"))
	fmt.Println("stale write rejected:", errors.Is(err, correctness.ErrStaleToken))
	value, _, _ := reg.Read(ctx, "account-42")
	fmt.Println("value:", string(value))
	fmt.Println("holder's token is newer:", env.Holder("account-42").Token > lease.Token())
	// Output:
	// stale write rejected: true
	// value: the new holder's balance
	// holder's token is newer: true
}

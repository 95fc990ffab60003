package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/cron/gocronlock"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/leasetest"
)

// Every replica of a service runs the same scheduler; each run of the job
// happens on one of them.
func Example() {
	env, err := leasetest.Start() // in production: redis.NewClient(...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()

	locker := efficiency.New(env.Client)
	defer locker.Close()
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(
		gocronlock.New(locker, gocronlock.WithMinHold(30*time.Second)),
	))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = s.NewJob(
		gocron.CronJob("*/5 * * * *", false), // every five minutes
		gocron.NewTask(func() { /* send the report */ }),
		gocron.WithName("send-report"), // the lock's name: the same on every replica
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Start()
	defer s.Shutdown()
	fmt.Println("scheduled")
	// Output: scheduled
}

// A job that takes a few milliseconds, on two schedulers whose clocks differ
// by more than that: the slower scheduler asks after the faster one has
// unlocked, and the minimum hold still refuses it.
func ExampleWithMinHold() {
	env, err := leasetest.Start()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	ctx := context.Background()

	aheadLocker, behindLocker := efficiency.New(env.Client), efficiency.New(env.Client)
	defer aheadLocker.Close()
	defer behindLocker.Close()
	ahead := gocronlock.New(aheadLocker, gocronlock.WithMinHold(time.Second))
	behind := gocronlock.New(behindLocker, gocronlock.WithMinHold(time.Second))

	lock, err := ahead.Lock(ctx, "send-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ahead runs the tick")
	fmt.Println("unlock:", lock.Unlock(ctx))

	_, err = behind.Lock(ctx, "send-report")
	fmt.Println("behind runs it again:", !errors.Is(err, efficiency.ErrNotObtained))
	// Output:
	// ahead runs the tick
	// unlock: <nil>
	// behind runs it again: false
}

// Every replica runs the same scheduler with an Elector: only the leader
// runs jobs, and its term fences what they write.
func ExampleNewElector() {
	env, err := leasetest.Start() // in production: redis.NewClient(...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the Observe below

	locker := correctness.New(env.Client, correctness.WithAudit(false))
	defer locker.Close()
	elector, err := gocronlock.NewElector(locker, "reports", gocronlock.WithElectorValue([]byte("host-a")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer elector.Close() // hands leadership over at once
	reg := correctness.NewRegister(env.Client)
	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = s.NewJob(
		gocron.DurationJob(time.Minute),
		gocron.NewTask(func() {
			// A leader that paused past its lease gets ErrStaleToken here.
			_ = reg.Write(ctx, "report", elector.Term(), []byte("sent"))
		}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Start()
	defer s.Shutdown()

	// Who leads, as any process can see it.
	leaders, err := locker.Observe(ctx, "reports")
	if err != nil {
		fmt.Println(err)
		return
	}
	for l := range leaders {
		if l.Term != 0 {
			fmt.Println("leader:", string(l.Value))
			break
		}
	}
	// Output: leader: host-a
}

package correctness_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/leasetest"
)

// Two replicas campaign in one election: host-a leads first, and when it
// returns, host-b, which was waiting in line, takes over with a higher term.
// Every write carries the term, so a write host-a makes after its term ended
// (after a pause, say) is refused.
func ExampleLocker_Campaign() {
	env, err := leasetest.Start() // in production: redis.NewClient(...)
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx := context.Background()
	replicaA, replicaB := env.Correctness(), env.Correctness() // one Locker per process
	reg := correctness.NewRegister(env.Client)

	var termA uint64
	done := make(chan error, 1)
	err = replicaA.Campaign(ctx, "scheduler", 10*time.Second, []byte("host-a"), func(leading context.Context, term uint64) error {
		termA = term
		leader, err := replicaB.Leader(leading, "scheduler") // any process can ask
		if err != nil {
			return err
		}
		fmt.Printf("%s leads\n", leader.Value)
		go func() { // host-b waits in line
			done <- replicaB.Campaign(ctx, "scheduler", 10*time.Second, []byte("host-b"), func(leading context.Context, term uint64) error {
				fmt.Println("host-b leads, with a higher term:", term > termA)
				return reg.Write(leading, "schedule", term, []byte("planned by host-b"))
			})
		}()
		return reg.Write(leading, "schedule", term, []byte("planned by host-a"))
	}) // host-a resigns here
	if err != nil {
		fmt.Println(err)
	}
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	err = reg.Write(ctx, "schedule", termA, []byte("late"))
	fmt.Println("host-a's late write refused:", errors.Is(err, correctness.ErrStaleToken))
	_, err = replicaA.Leader(ctx, "scheduler")
	fmt.Println("leader now:", err)
	// Output:
	// host-a leads
	// host-b leads, with a higher term: true
	// host-a's late write refused: true
	// leader now: correctness: no leader: election "scheduler"
}

// An observer sees the election's leader first, then every change: a
// leader, and none when the election has no leader.
func ExampleLocker_Observe() {
	env, err := leasetest.Start()
	if err != nil {
		panic(err)
	}
	defer env.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // closes the channel
	locker := env.Correctness()

	leaders, err := locker.Observe(ctx, "scheduler")
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func() {
		if l := <-leaders; l.Term == 0 {
			fmt.Println("no leader")
		} else {
			fmt.Println("leader", string(l.Value))
		}
	}
	show()
	for _, host := range []string{"host-a", "host-b"} {
		err := locker.Campaign(ctx, "scheduler", 10*time.Second, []byte(host), func(context.Context, uint64) error {
			show() // the leader has taken office
			return nil
		})
		if err != nil {
			fmt.Println(err)
		}
		show() // it has resigned, and nobody was in line
	}
	// Output:
	// no leader
	// leader host-a
	// no leader
	// leader host-b
	// no leader
}

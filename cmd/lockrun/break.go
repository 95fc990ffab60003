package main

import (
	"context"
	"fmt"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/redis/go-redis/v9"
)

// breakLock ends the lease on the lock cfg names, whoever holds it, and
// hands it to the first live waiter, as the holder's release would (with
// -fenced, a correctness Locker's Break, which also deposes an election's
// leader). It prints what it did and returns the exit status: 0 when a
// lease was broken, 1 when nobody held the lock, 65 when its key holds what
// leasekit never writes, and 69 or 77 as any run.
func breakLock(ctx context.Context, client *redis.Client, cfg config, std stdio) int {
	var broken bool
	var err error
	errs := efficiencyErrors
	if cfg.fenced {
		errs = correctnessErrors
		l := correctness.New(client, correctness.WithPrefix(cfg.prefix), correctness.WithAudit(false))
		defer l.Close()
		broken, err = l.Break(ctx, cfg.name)
	} else {
		l := efficiency.New(client, efficiency.WithPrefix(cfg.prefix))
		defer l.Close()
		broken, err = l.Break(ctx, cfg.name)
	}
	switch {
	case err != nil:
		return fail(std.err, failed(cfg, errs, err))
	case !broken:
		if _, held, ok := semaphoreHeld(ctx, client, cfg); ok {
			return fail(std.err, exitf(exitUsage, "%s is a semaphore, not a lock (%d permits held): -break breaks locks; "+
				"a permit whose holder died returns at its ttl (lockrun -n LIMIT -status %s shows them)", cfg.name, held, cfg.name))
		}
		fmt.Fprintf(std.out, "lock %s: nobody held it; nothing broken\n", cfg.name)
		return exitNotBroken
	}
	fmt.Fprintf(std.out, "lock %s: broken; its first live waiter, if any, holds it now. The broken holder may still be running until its next refresh\n", cfg.name)
	return 0
}

package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/redis/go-redis/v9"
)

// ops is how the engine runs one kind of resource: the locks of a Core, or
// the permits of one semaphore. Acquiring, waiting, the handoff and a Held
// are the same for both; the scripts, the telemetry and the words differ.
type ops struct {
	what   string // "lock" or "semaphore"
	sem    bool
	limit  int // a semaphore's
	tel    *telemetry.Telemetry
	tryOp  string // the acquires, as spans name them
	waitOp string
	// The scripts of a waiter's attempt and of a Held's operations. (A
	// lone attempt differs more: see acquire.once.)
	wait, release, refresh, pttl Script
	// arg is the wait script's ARGV[3], boxed once: the lock's kind, or the
	// semaphore's limit.
	arg any
}

// lockOps are the ops of a Core's locks.
func lockOps(c *Core) *ops {
	return &ops{what: "lock", tel: c.cfg.Telemetry, tryOp: c.cfg.TryOp, waitOp: c.cfg.WaitOp,
		wait: waitScript, release: releaseScript, refresh: refreshScript, pttl: pttlScript, arg: c.scriptKind}
}

// checkLimit reports a semaphore whose limit is below 1.
func (o *ops) checkLimit(invalid error) error {
	if o.sem && o.limit < 1 {
		return fmt.Errorf("%w: %d is below 1", invalid, o.limit)
	}
	return nil
}

// busy says why a TryObtain or TryAcquire of name found no room.
func (o *ops) busy(name string) string {
	if o.sem {
		return fmt.Sprintf("semaphore %s: all %d permits are held", Quote(name), o.limit)
	}
	return "lock " + Quote(name) + " is held by another owner"
}

// refreshWith runs the refresh script of lk for the grant stored as value;
// with leader, an election's leader key, which it keeps alive too.
func (c *Core) refreshWith(ctx context.Context, lk *keySet, value string, ttl time.Duration, leader string) *redis.Cmd {
	switch {
	case leader != "":
		kind := ""
		if c.cfg.ExpiringCounter {
			kind = "t"
		}
		return c.run(ctx, refreshScript, []any{lk.keys[0], lk.keys[2], leader}, value, Millis(ttl), kind)
	case c.cfg.ExpiringCounter && !lk.ops.sem:
		// The counter lives as long as the lease that drew from it.
		return c.run(ctx, refreshScript, lk.refreshKeys(), value, Millis(ttl), "t")
	}
	return c.run(ctx, lk.ops.refresh, lk.held(), value, Millis(ttl))
}

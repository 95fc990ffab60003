package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/leasekit/leasekit/scripts"
)

// What an operator may do to a lock or semaphore in production: read it
// (Inspect) and end a stuck lease (Break). Neither ever returns or logs an
// owner id.

// matchAny is the release script's ARGV[2] for a break: the grant it names,
// whoever holds it.
var matchAny any = "2"

// Info is what Inspect reads of a lock.
type Info struct {
	Held    bool          // a live lease holds the lock
	TTL     time.Duration // left on that lease; 0 when not held, -1 without expiry
	Waiters int           // live waiters queued for it
	// Token is the holder's fencing token; when not held, the last token
	// granted (0: none yet, or an efficiency lock).
	Token uint64
}

// Inspect reads the lock called name in one round trip, changing nothing.
// Waiters counts the live entries among the first 300 of the queue exactly,
// and every entry past those: the script stays short whatever the queue
// holds. Waiters that do not queue (a Ring, a Redis 6 cluster) are not
// counted.
func (c *Core) Inspect(ctx context.Context, name string) (Info, error) {
	if err := c.operate("inspect", name); err != nil {
		return Info{}, err
	}
	lk := c.lockKeys(name)
	reply, err := c.run(ctx, inspectScript, lk.keys, c.listen.channels)
	if err != nil {
		return Info{}, c.operationErr(ctx, "inspect", lk, err)
	}
	got, err := scripts.ReadInspect(reply, c.cfg.Fenced)
	var bad *scripts.BadTokenError
	if errors.As(err, &bad) {
		return Info{}, namesLock(fmt.Errorf("%w: %s: fence counter %s holds %q, not a fencing token; repair or delete it",
			c.cfg.Errors.InvalidToken, lk.label(), Quote(scripts.CounterKey(lk.key)), bad.Text))
	} else if err != nil {
		return Info{}, c.redisErr(ctx, "inspect", lk, err)
	}
	info := Info{Held: got.Held, TTL: time.Duration(got.TTL) * time.Millisecond, Waiters: int(got.Waiters), Token: got.Token}
	if got.TTL < 0 {
		info.TTL = -1
	}
	return info, nil
}

// SemaphoreInfo is what Semaphore.Inspect reads.
type SemaphoreInfo struct {
	Limit   int // the limit of the live permits; 0 when none is live
	Held    int // live permits
	Waiters int // live waiters queued, counted as Inspect counts a lock's
}

// Inspect reads the semaphore in one round trip, changing nothing.
func (s *Semaphore) Inspect(ctx context.Context) (SemaphoreInfo, error) {
	c, lk := s.c, s.keys
	if err := c.operate("inspect", lk.name); err != nil {
		return SemaphoreInfo{}, err
	}
	reply, err := c.run(ctx, semInspectScript, lk.keys, c.listen.channels)
	var got scripts.SemInfo
	if err == nil {
		got, err = scripts.ReadSemInspect(reply)
	}
	if err != nil {
		return SemaphoreInfo{}, c.operationErr(ctx, "inspect", lk, err)
	}
	return SemaphoreInfo{Limit: int(got.Limit), Held: int(got.Held), Waiters: int(got.Waiters)}, nil
}

// Break ends the lease on the lock called name at once, whoever holds it,
// and hands the lock to the first live waiter, exactly as the holder's
// release would; with leaderKey, an election's, it also clears the broken
// holder's term there and tells the observers. It reads the holder first,
// then ends exactly that grant, leaving a mark of it: a resend of the call
// after a lost reply (go-redis resends), or a Break racing the holder's own
// release, never ends the grant of the waiter the lock went to next. It
// reports whether a live lease was broken. The broken holder is not told:
// its next refresh finds another owner (its Do, Hold or Campaign ends with
// LockLost), and its Release returns NotHeld. Every break is logged at WARN
// and counted.
func (c *Core) Break(ctx context.Context, name, leaderKey string) (broken bool, err error) {
	if err := c.operate("break", name); err != nil {
		return false, err
	}
	lk := c.lockKeys(name)
	tel := lk.kind.telemetry()
	ctx, span := tel.Start(ctx, "Break", name)
	defer func() { telemetry.End(span, err) }()
	reply, err := c.cfg.Conn.Do(ctx, "GET", lk.key)
	held, ok := reply.(string)
	switch {
	case errors.Is(err, port.Nil):
		return false, nil
	case err == nil && !ok:
		err = fmt.Errorf("GET answered %T, not a string", reply)
	}
	if err != nil {
		return false, c.operationErr(ctx, "break", lk, err)
	}
	ended, err := c.endGrant(ctx, lk, scripts.Grant(held), &breakCall{nonce: rand.Text(), leader: leaderKey})
	if err != nil {
		return false, c.operationErr(ctx, "break", lk, err)
	}
	if ended.Unheld() {
		return false, nil
	}
	c.logger().Warn(c.cfg.Kind+": broke the lease on a lock: its holder was not asked, and may still be running", "lock", name)
	tel.Broken(ctx, name)
	return true, nil
}

// operate checks what every operator's call on the lock or semaphore called
// name must: an open Core and a name a lock can have.
func (c *Core) operate(op, name string) error {
	if c.closed.Load() {
		return fmt.Errorf("%w: cannot %s lock %s", c.cfg.Errors.Closed, op, Quote(name))
	}
	return CheckName(c.cfg.Errors.InvalidKey, name)
}

// operationErr is the error of an operator's call that Redis failed: an
// error reply the caller can act on matches its sentinel, as an acquire's
// does (kind.refused).
func (c *Core) operationErr(ctx context.Context, op string, lk *keySet, err error) error {
	if e := lk.kind.refused(lk, err); e != nil {
		return e
	}
	return c.redisErr(ctx, op, lk, err)
}

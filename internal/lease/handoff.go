package lease

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The handoff's wire format. This file builds and parses it; wait.lua and
// release.lua, which read and write the same strings on the server, point
// here.
//
// A queue entry is a member of the lock's wait queue (QueueKey, a sorted set
// scored by arrival: the server clock in microseconds, kept increasing):
//
//	entry   = owner SP ttl SP kind SP ticket SP channel
//	owner   = the waiter's owner id (no space, no ':')
//	ttl     = the lease length in milliseconds: digits, no leading zero
//	kind    = "e" | "f" | "c" | "t"   (see Core.kind)
//	ticket  = the waiter's random id for its Locker (no space)
//	channel = the pub/sub channel of the waiter's Locker (GrantChannel)
//
// A grant message is what a release that handed the lock over publishes on
// the entry's channel:
//
//	grant   = ticket SP token SP place SP seconds SP micros
//	token   = the new fencing token in decimal, or "-" for an efficiency grant
//	place   = the entry's score
//	seconds, micros = the server clock at the grant, as TIME gives it
//
// The ticket, not the owner id, names the waiter: every subscriber of the
// channel reads the message, and an owner id would let it release the lock.
// The Notifier hands a message to the waiter whose ticket opens it (package
// notify reads only that first field).
//
// A lock's value is the owner id (efficiency) or "owner:token"
// (correctness), followed by QueuedMark once a waiter has queued for that
// grant: wait.lua adds it when it queues one, a handoff and a waiter's own
// grant set it, and release.lua looks at the queue only when it is there, so
// that the release of a lock nobody waited for is a GET and a DEL. Every
// script that compares a value accepts it with or without the mark, and
// none returns it.
//
//	value = owner [ ":" token ] [ QueuedMark ]

// QueuedMark ends the value of a lock that waiters have queued for.
const QueuedMark = "*"

// Mine reports whether the lock value v is owner's efficiency grant, marked
// as queued for or not.
func Mine(v, owner string) bool { return v == owner || v == owner+QueuedMark }

// newEntry is a waiter's queue entry.
func newEntry(owner string, ttl time.Duration, kind, ticket, channel string) string {
	return owner + " " + strconv.FormatInt(Millis(ttl), 10) + " " + kind + " " + ticket + " " + channel
}

// handed turns a grant message into the lease: the lock, handed to this waiter
// by its holder's release when the server clock read seconds and micros, is
// its own since that long after it queued at place (microseconds on the same
// clock). The lease is measured from the time the attempt that queued it was
// sent (queued), plus that wait. A wait longer than the one seen here means
// the server's clock stepped forward meanwhile; then only the send time is
// sure. A message for an earlier place, or one that does not parse (from a
// release of another version), is no grant: nil, and the caller asks Redis
// again.
func (c *Core) handed(ctx context.Context, lk *Keys, owner string, ttl time.Duration, msg string, place int64, queued time.Time) (*Held, error) {
	f := strings.Fields(msg)
	if len(f) != 5 {
		return nil, nil
	}
	at, err1 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || place == 0 || int64(at) != place {
		return nil, nil
	}
	// TIME's seconds and microseconds; seconds bounded so that the sum
	// cannot overflow.
	sec, err2 := strconv.ParseInt(f[3], 10, 64)
	usec, err3 := strconv.ParseInt(f[4], 10, 64)
	if err2 != nil || err3 != nil || sec < 0 || sec >= math.MaxInt64/1_000_000 || usec < 0 || usec >= 1_000_000 {
		return nil, nil
	}
	waited := sec*1_000_000 + usec - place
	value := owner
	if f[1] != "-" {
		value = owner + ":" + f[1]
	}
	a, err := c.Grant(lk, owner, value)
	if err == nil && c.cfg.Replicas > 0 {
		var held bool
		if held, err = c.confirmHanded(ctx, lk, value, ttl); err == nil && !held {
			return nil, nil // gone already: the next attempt settles it
		}
	}
	if err != nil {
		c.abandon(ctx, lk, owner, ttl, "")
		return nil, c.acquireErr(lk, err)
	}
	wait := time.Duration(max(waited, 0)) * time.Microsecond
	if wait > time.Since(queued) {
		wait = 0
	}
	return c.held(ctx, lk, owner, a, queued.Add(wait), ttl)
}

// confirmHanded waits for Replicas to confirm a grant that another holder's
// release handed to this waiter, and reports whether the waiter still holds
// it. WAIT counts the replicas that have every write of the connection it
// runs on, and the handoff was the releaser's write: so the waiter writes
// first, in the same round trip (the refresh script restarts its ttl), after
// the handoff in the replication stream, and WAIT confirms both. Fewer
// replicas is an error matching NotReplicated, as for a grant of its own.
func (c *Core) confirmHanded(ctx context.Context, lk *Keys, value string, ttl time.Duration) (bool, error) {
	reply, confirmed, err := c.runConfirmed(ctx, refreshScript, lk, 1, value, Millis(ttl))
	if err != nil {
		return false, err
	}
	if n, _ := reply.(int64); n != 1 {
		return false, nil
	}
	if confirmed < int64(c.cfg.Replicas) {
		return true, Named(fmt.Errorf("%w: lock %s: %d of %d replicas confirmed the handed grant within %v",
			c.cfg.Errors.NotReplicated, Quote(lk.name), confirmed, c.cfg.Replicas, c.cfg.ReplicaWait))
	}
	return true, nil
}

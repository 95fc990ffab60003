package correctness

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
)

// Info is what Inspect reads of a lock. Nothing in it lets anyone release
// the lock.
type Info struct {
	Held    bool          // a live lease holds the lock
	TTL     time.Duration // left on that lease; 0 when not held (negative: a key set by hand without expiry)
	Waiters int           // live waiters queued for it
	Token   uint64        // the holder's token; when not held, the last token granted (0: none yet)
}

// Inspect reads the lock called name in one round trip, without changing
// anything, and never returns or logs the holder's owner id. A lease that
// lapsed (its holder died) with waiters queued is not held: the first live
// waiter takes it at its next attempt. Waiters counts the live entries
// among the first 300 of the lock's queue, and every entry past those
// unchecked, so that the read stays short however many a killed process
// left; waiters on a Ring or a Redis 6 cluster do not queue and are not
// counted. It returns ErrInvalidKey for a bad name, ErrClosed after Close,
// ErrInvalidToken naming the counter when the fence counter holds no token,
// and a Redis failure naming the lock and its key (a key that holds what
// leasekit never writes: WRONGTYPE).
func (l *Locker) Inspect(ctx context.Context, name string) (Info, error) {
	i, err := l.core.Inspect(ctx, name)
	return Info{Held: i.Held, TTL: i.TTL, Waiters: i.Waiters, Token: i.Token}, err
}

// Break ends the lease on the lock called name at once, whoever holds it,
// and hands the lock to the first live waiter, exactly as the holder's
// release would, with a token higher than the broken holder's. It reports
// whether a live lease was broken (false when nobody held the lock).
// Breaking an election's lock deposes its leader: its term is cleared from
// the leader key, and observers see the next leader or a vacancy. The
// broken holder is not asked, and may still be running until it learns of
// the break: every fence refuses its writes once its successor has written
// or claimed. Its Do, Hold or Campaign learns of it at its next refresh
// (its ctx ends with ErrLockLost), and its Release returns ErrNotHeld.
// Every break is logged at WARN with the lock's name and counted
// (leasekit.lock.breaks, and a span). Errors as Inspect's.
func (l *Locker) Break(ctx context.Context, name string) (broken bool, err error) {
	return l.core.Break(ctx, name, lease.LeaderKey(lease.LockKey(l.opts.prefix, name)))
}

var proclaimScript = lease.NewScript(scripts.ElectionProclaim)

// Proclaim changes the value the election called name reports for its
// leader of term, without a new term: Leader and every observer see the
// new value with the same term. Call it from the leader's fn, with the term
// Campaign gave it. It fails with an error matching ErrLockLost when term is
// no longer in office (nothing changes then), takes the value rules of
// Campaign (at most MaxLeaderValue bytes), and returns ErrInvalidKey for a
// bad name, ErrClosed after Close, and a Redis failure naming the election.
func (l *Locker) Proclaim(ctx context.Context, name string, term uint64, value []byte) error {
	e, err := l.electionOf("proclaim in", name)
	switch {
	case err != nil:
		return err
	case len(value) > MaxLeaderValue:
		return fmt.Errorf("correctness: Proclaim in election %s: the value is %d bytes, over MaxLeaderValue (%d)",
			lease.Quote(name), len(value), MaxLeaderValue)
	case term == 0:
		return fmt.Errorf("%w: election %s: term 0 is no grant's", ErrLockLost, lease.Quote(name))
	}
	n, err := proclaimScript.Run(ctx, l.client, e.keys, strconv.FormatUint(term, 10), value, e.channel).Int64()
	if err != nil {
		return lease.WrapRedis("correctness", "proclaim in election", name, lease.KeyErr(e.channel, err))
	}
	if n != 1 {
		return fmt.Errorf("%w: election %s: term %d is not in office", ErrLockLost, lease.Quote(name), term)
	}
	return nil
}

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
	Token   uint64        // the holder's token; when not held, the last token the lock's Redis counter granted (0: none yet), which under WithTokens is not the source's
}

// Inspect reads the lock called name, and its token, as
// [github.com/leasekit/leasekit/efficiency.Locker.Inspect] reads a lock. It
// fails as that does, and also with ErrInvalidToken, naming the counter,
// when the lock's fence counter holds no token.
func (l *Locker) Inspect(ctx context.Context, name string) (Info, error) {
	l.mustExist("Inspect")
	i, err := l.core.Inspect(ctx, name)
	return Info{Held: i.Held, TTL: i.TTL, Waiters: i.Waiters, Token: i.Token}, err
}

// Break ends the lease on the lock called name at once, whoever holds it,
// as [github.com/leasekit/leasekit/efficiency.Locker.Break] does, and the
// lock's next holder gets a token higher than the broken holder's. The
// broken holder may run on until it learns of the break, but every fence
// refuses its writes once its successor has written or claimed. Breaking an
// election's lock deposes its leader: its term is cleared from the leader
// key, observers see the next leader or a vacancy, and its Campaign learns
// of the break at its next refresh, as a Do or Hold does. Errors as
// Inspect's.
func (l *Locker) Break(ctx context.Context, name string) (broken bool, err error) {
	l.mustExist("Break")
	return l.core.Break(ctx, name, scripts.LeaderKey(scripts.LockKey(l.opts.prefix, name)))
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
	l.mustExist("Proclaim")
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
	reply, err := proclaimScript.Run(ctx, l.conn, e.keys, strconv.FormatUint(term, 10), value, e.channel)
	var done bool
	if err == nil {
		done, err = scripts.ReadDone(reply)
	}
	if err != nil {
		return lease.WrapRedis("correctness", "proclaim in election", name, lease.KeyErr(e.leader, err))
	}
	if !done {
		return fmt.Errorf("%w: election %s: term %d is not in office", ErrLockLost, lease.Quote(name), term)
	}
	return nil
}

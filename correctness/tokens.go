package correctness

import (
	"context"
	"errors"
)

// TokenSource issues the fencing tokens of a Locker's grants in place of the
// lock's Redis counter: see WithTokens. Package
// [github.com/leasekit/leasekit/correctness/etcdtokens], a module of its
// own, draws them from etcd.
type TokenSource interface {
	// Token returns a new token for the lock called name: greater than every
	// token it has returned for name before, whatever happened to Redis
	// meanwhile. floor is the token the lock's Redis counter gave this grant;
	// a source may use it once, to start above the tokens Redis issued for
	// the lock before it was chosen. It is called while the caller holds the
	// lease, with a ctx that ends at the lease's deadline. A token must be
	// positive and below 2^63 - 1, as every fence expects.
	Token(ctx context.Context, name string, floor uint64) (uint64, error)
}

// ErrNoToken means the Locker's TokenSource (WithTokens) could not issue the
// grant's token: it failed (the error wraps its cause) or did not answer
// before the lease's deadline. The grant was released; nothing is granted
// without a token. Leases already held are not affected: their refreshes
// and releases do not call the source.
var ErrNoToken = errors.New("correctness: no token from the token source")

// WithTokens makes the Locker draw every grant's fencing token from src
// instead of the lock's Redis counter, and Campaign every term. Default: the
// Redis counter, with the clock floor (WithClockFloor).
//
// Waiting, the queue's handoff, refreshes and releases stay in Redis, as
// fast as without: a grant (a lone acquire's, or one a release hands to a
// waiter) is made in Redis as always, and then, before Acquire returns, its
// holder draws the token from src and stores it in the grant in Redis, in
// one round trip more that restarts the lease. A grant whose lease ends
// before its token is stored fails with ErrLateGrant. So a token is drawn
// while its lease is held: with a linearizable src, a later holder's token
// is greater, and a lock granted twice because Redis lost its state (a
// restart without persistence, a failover that lost writes, a clock step,
// FLUSHALL) is granted with two tokens, of which the fences accept only the
// newer. What each source guarantees: docs/fencing.md.
//
// Every Locker of one lock name must use the same source: tokens of two
// sources are not comparable. The fences (Register, ExecFenced,
// FencingProxy) need no change. A nil src keeps the default.
func WithTokens(src TokenSource) Option { return func(o *options) { o.tokens = src } }

// tokensOf is src's Token as the engine calls it; nil for none.
func tokensOf(src TokenSource) func(context.Context, string, uint64) (uint64, error) {
	if src == nil {
		return nil
	}
	return src.Token
}

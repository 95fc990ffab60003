package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/scripts"
)

// Tokens draws a grant's fencing token from a source outside Redis (a
// consensus store) in place of the lock's counter: Config.Tokens.
//
// It returns a new token for the lock called name, greater than every token
// it returned before for name. floor is the token the lock's Redis counter
// gave this grant, which a source may use once, to start above the tokens
// Redis issued before it (a lock that switched sources).
type Tokens func(ctx context.Context, name string, floor uint64) (uint64, error)

// The grant of a Core with Tokens is one protocol with every other: the
// scripts grant it, with the Redis counter's token, as they grant any fenced
// lock (a waiter is handed it the same way). Then, before the acquire
// returns, the holder draws the token from the source and stores it in its
// grant in Redis (the refresh script with a new value, which restarts the
// lease, and marks that it did for a resend): the stamp. A stamp that finds
// the lease gone fails the grant.
//
// So a token is drawn while its holder holds the lease, and stamped while
// it still does: a later holder's grant, made after that lease ended, draws
// its token later, and a linearizable source gives it a greater one. A lock
// whose Redis state was lost (a restart without persistence, a failover
// that lost writes) may be granted twice, but never with the same token,
// nor with a smaller one after a greater was drawn: the fence decides.

// stamped draws the token of the grant f from the source, stores it in the
// grant, and returns the lease of lock l. start is a time no later than
// the grant, and deadline its lease deadline: the source must answer before
// it. A source that fails, or answers too late, fails the grant (released),
// with an error matching NoToken; a lease that ended before the stamp, with
// one matching Late.
func (a *acquire) stamped(l *lock, f found, start, deadline time.Time) (*Held, error) {
	c := a.c
	drawn := time.Now()
	ctx, cancel := context.WithDeadline(a.ctx, deadline)
	token, err := c.cfg.Tokens(ctx, a.keys.name, f.token)
	cancel()
	if err == nil && token == 0 {
		err = errors.New("the source returned token 0")
	}
	if err != nil {
		a.logUnreleased(a.release(f.value))
		if a.ctx.Err() != nil {
			return nil, c.notObtained(a.keys, a.ctx.Err(), err)
		}
		return nil, namesLock(fmt.Errorf("%w: %s: the token source failed: %w; released the grant, which has no token",
			c.cfg.Errors.NoToken, a.keys.label(), err))
	}
	value := scripts.GrantValue(a.owner, token)
	sent := time.Now()
	took := sent.Sub(drawn)
	var counter any = ""
	if c.cfg.ExpiringCounter {
		counter = "t"
	}
	keys := []any{a.keys.keyArg, l.counter, scripts.StampKey(a.keys.key, value)}
	reply, err := c.run(a.ctx, refreshScript, keys, f.value, Millis(a.ttl), counter, value)
	var r scripts.Refreshed
	if err == nil {
		r, err = scripts.ReadRefresh(reply)
	}
	if err != nil {
		// It may have stamped it: any grant of the owner's goes.
		a.logUnreleased(a.releaseAny(nil))
		return nil, c.redisErr(a.ctx, "store the token of", a.keys, err)
	}
	if r.Lease != scripts.LeaseHeld {
		return nil, fmt.Errorf("%w: %s: the lease ended before its token was stored (the token source took %v; ttl %v)",
			c.cfg.Errors.Late, a.keys.label(), took.Round(time.Microsecond), a.ttl)
	}
	return &Held{core: c, keys: a.keys, value: value, token: token, granted: start, deadline: sent.Add(a.ttl - c.drift(a.ttl)), ttl: a.ttl}, nil
}

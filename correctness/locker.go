package correctness

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Locker grants correctness leases, each with a fencing token. It is safe for
// concurrent use; create one per process and Close it when done.
type Locker struct {
	client redis.UniversalClient
	opts   options
	core   *lease.Core
	audit  sync.Once
}

// New returns a Locker that runs its leases through client, which may be a
// *redis.Client, *redis.ClusterClient or any other UniversalClient.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	l := &Locker{client: client, opts: newOptions(opts)}
	l.core = lease.New(lease.Config{
		Client:      client,
		Prefix:      l.opts.prefix,
		DriftFactor: l.opts.drift,
		Owners:      l.opts.owners,
		Logger:      l.opts.logger,
		Mine:        func(owner string) (string, bool) { return owner + ":", true },
		Errors: lease.Errors{
			NotObtained:  ErrNotObtained,
			NotHeld:      ErrNotHeld,
			LockLost:     ErrLockLost,
			InvalidKey:   ErrInvalidKey,
			InvalidTTL:   ErrInvalidTTL,
			InvalidToken: ErrInvalidToken,
		},
		Acquire:    l.acquire,
		Fenced:     true,
		ClockFloor: l.opts.clockFloor,
		Replicated: l.opts.replicas > 0,
	})
	return l
}

// Close ends the Locker's wake-up subscription. Acquire calls still waiting
// return ErrNotObtained. Held leases are not released. Close does not close
// the client.
func (l *Locker) Close() error { return l.core.Close() }

// acquire runs the fenced acquire script, with WAIT in the same pipeline when
// WithReplicas is set: one round trip either way.
func (l *Locker) acquire(ctx context.Context, k *lease.Keys, owner string, ttl time.Duration, _ lease.Mode) (lease.Attempt, error) {
	key := k.Lock()
	floor := floorOff
	if l.opts.clockFloor {
		floor = floorOn
	}
	if l.opts.replicas == 0 {
		reply, err := l.core.Run(ctx, fencedAcquire, k, 3, owner, lease.Millis(ttl), floor).Result()
		if err != nil {
			return lease.Attempt{}, lease.WrapRedis("acquire", key, err)
		}
		return l.parseGrant(key, owner, reply)
	}
	reply, confirmed, err := l.acquireReplicated(ctx, k.Strings(3), []any{owner, lease.Millis(ttl), floor})
	if err != nil {
		return lease.Attempt{}, lease.WrapRedis("acquire", key, err)
	}
	a, err := l.parseGrant(key, owner, reply)
	if err != nil || !a.Granted || confirmed >= int64(l.opts.replicas) {
		return a, err
	}
	// The caller releases the grant, as after any error (lease.Core.attempt).
	return lease.Attempt{}, fmt.Errorf("%w: %s: %d of %d replicas confirmed within %v",
		ErrNotReplicated, lease.Quote(key), confirmed, l.opts.replicas, l.opts.replicaWait)
}

func (l *Locker) acquireReplicated(ctx context.Context, keys []string, args []any) (any, int64, error) {
	// WAIT counts the replicas of the node it runs on, so in a cluster it must
	// go, with the script, to the master of the lock's slot.
	var node redis.Cmdable = l.client
	if cc, ok := l.client.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, 0, err
		}
		node = master
	}
	run := func(eval func(redis.Pipeliner) *redis.Cmd) (any, int64, error) {
		pipe := node.Pipeline()
		grant := eval(pipe)
		wait := pipe.Do(ctx, "WAIT", l.opts.replicas, lease.Millis(l.opts.replicaWait))
		if _, err := pipe.Exec(ctx); err != nil && grant.Err() != nil {
			return nil, 0, grant.Err()
		}
		confirmed, err := wait.Int64()
		if err != nil {
			return nil, 0, fmt.Errorf("WAIT: %w", err)
		}
		return grant.Val(), confirmed, nil
	}
	reply, n, err := run(func(p redis.Pipeliner) *redis.Cmd {
		return scripts.FencedAcquire.EvalSha(ctx, p, keys, args...)
	})
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		return run(func(p redis.Pipeliner) *redis.Cmd {
			return scripts.FencedAcquire.Eval(ctx, p, keys, args...)
		})
	}
	return reply, n, err
}

// fencedAcquire is the acquire script, ready for lease.Core.Run, and floorOn
// and floorOff its clock-floor argument, boxed once.
var (
	fencedAcquire         = lease.NewScript(scripts.FencedAcquire)
	floorOn, floorOff any = "1", "0"
)

// parseGrant reads the fenced acquire script's reply: a token string when
// granted, the holder's ttl in ms otherwise.
func (l *Locker) parseGrant(key, owner string, reply any) (lease.Attempt, error) {
	switch v := reply.(type) {
	case string:
		return l.core.Grant(key, owner, owner+":"+v)
	case int64:
		return lease.Attempt{HolderTTL: time.Duration(v) * time.Millisecond}, nil
	}
	return lease.Attempt{}, fmt.Errorf("leasekit: acquire %s: unexpected reply %T", lease.Quote(key), reply)
}

// auditOnce runs Audit on the first acquire and logs what is not OK.
func (l *Locker) auditOnce(ctx context.Context) {
	if !l.opts.audit {
		return
	}
	l.audit.Do(func() {
		findings, err := l.Audit(ctx)
		if err != nil {
			l.opts.logger.Warn("leasekit: correctness audit could not run", "err", err)
			return
		}
		for _, f := range findings {
			if f.Status != StatusOK {
				l.opts.logger.Warn("leasekit: correctness audit: "+f.Check+" "+f.Status.String(),
					"check", f.Check, "status", f.Status.String(), "detail", f.Detail)
			}
		}
	})
}

// TryAcquire makes one attempt to take the lock called key for ttl, with a new
// fencing token. It returns ErrNotObtained when another owner holds it,
// ErrInvalidKey or ErrInvalidTTL for bad input, ErrNotReplicated under
// WithReplicas, and a Redis failure wrapped with the key's name.
func (l *Locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	l.auditOnce(ctx)
	h, err := l.core.Try(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &Lease{h: h}, nil
}

// Acquire takes the lock called key for ttl, with a new fencing token, waiting
// while another owner holds it. Waiters are served as by efficiency's Obtain:
// on a *redis.Client (and without WithReplicas, whose grants must be
// confirmed by WAIT) the release hands the lock, with a new token, to the
// first waiter in arrival order; otherwise it wakes one waiter per Locker,
// which tries again. If the holder never releases, waiters try again when its
// ttl runs out. When ctx ends first, the error matches both ErrNotObtained and
// ctx.Err(). When three grants in a row come back after their lease deadline
// (a ttl shorter than the round trip), Acquire releases them and returns
// ErrNotObtained rather than try forever.
func (l *Locker) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	l.auditOnce(ctx)
	h, err := l.core.Obtain(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &Lease{h: h}, nil
}

// Do acquires the lock called key (waiting like Acquire), runs fn with the
// grant's fencing token while refreshing the lease every ttl/3, and releases
// the lock when fn returns. fn must pass token to every fenced write.
//
// fn's context is cancelled, with a cause matching ErrLockLost, as soon as the
// lease can no longer be confirmed before its deadline; Do's error then
// matches ErrLockLost. That only narrows the window: the fence is what rejects
// a write made after the lease was lost.
func (l *Locker) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, token uint64) error) error {
	l.auditOnce(ctx)
	return l.core.Do(ctx, key, ttl, func(ctx context.Context, h *lease.Held) error { return fn(ctx, h.Token()) })
}

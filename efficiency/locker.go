package efficiency

import (
	"context"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/redis/go-redis/v9"
)

// Conn is a client of another Redis library than go-redis, adapted for
// leasekit: package
// [github.com/leasekit/leasekit/efficiency/rueidisconn] makes one of a
// rueidis client, and
// [github.com/leasekit/leasekit/efficiency/valkeyconn] of a valkey-go
// client, each a module of its own. Pass it to NewConn (or to
// correctness.NewConn: a Conn serves both kinds). Its methods are the
// engine's; call none of them.
type Conn = port.Conn

// Locker grants efficiency locks. It is safe for concurrent use; create one per
// process and Close it when done.
// A method of a nil *Locker panics with a message that names it.
type Locker struct {
	core *lease.Core
}

// New returns a Locker that runs its locks through client, which may be a
// *redis.Client, *redis.ClusterClient or any other UniversalClient. It panics
// if client is nil, as net/http does for a nil handler: that is a bug in the
// caller, found at once rather than at the first lock.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	if lease.IsNilClient(client) {
		panic("efficiency: New: nil redis client")
	}
	return newLocker(port.GoRedis(client), opts)
}

// NewConn returns a Locker that runs its locks through conn, a client of
// another library than go-redis (see Conn): the Locker is New's in all but
// the client. It panics if conn is nil, and where New would.
func NewConn(conn Conn, opts ...Option) *Locker {
	if conn == nil {
		panic("efficiency: NewConn: nil Conn")
	}
	return newLocker(conn, opts)
}

// newLocker is New's and NewConn's Locker, on conn.
func newLocker(conn port.Conn, opts []Option) *Locker {
	o := newOptions(opts)
	o.tel.Kind = "efficiency"
	return &Locker{core: lease.New(lease.Config{
		Kind:        "efficiency",
		Telemetry:   telemetry.New(o.tel),
		TryOp:       "TryObtain",
		WaitOp:      "Obtain",
		Conn:        conn,
		Prefix:      o.prefix,
		DriftFactor: o.drift,
		Owners:      o.owners,
		Logger:      o.logger,
		Errors: lease.Errors{
			NotObtained:   ErrNotObtained,
			Taken:         ErrTaken,
			NotHeld:       ErrNotHeld,
			LockLost:      ErrLockLost,
			InvalidKey:    ErrInvalidKey,
			InvalidTTL:    ErrInvalidTTL,
			Closed:        ErrClosed,
			Late:          ErrLateGrant,
			InvalidLimit:  ErrInvalidLimit,
			LimitMismatch: ErrLimitMismatch,
		},
	})}
}

// Close makes every later TryObtain, Obtain, Do and Once fail with ErrClosed
// (and every acquire of its Semaphores), ends the Obtain calls still waiting
// with ErrClosed, and stops the Locker's wake-up subscription. Locks already
// held are not released, and can still be refreshed and released. Close does
// not close the client.
func (l *Locker) Close() error {
	l.mustExist("Close")
	return l.core.Close()
}

// TryObtain makes one attempt to take the lock called name for ttl. It
// returns ErrTaken (which matches ErrNotObtained too) when another owner
// holds it, an error matching ErrNotObtained and ctx.Err() (not ErrTaken)
// when ctx has ended, ErrLateGrant when the grant's reply came
// after its lease deadline, ErrInvalidKey or ErrInvalidTTL for bad input,
// ErrClosed after Close, and a Redis failure wrapped with the lock's name.
func (l *Locker) TryObtain(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	l.mustExist("TryObtain")
	h, err := l.core.Try(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	return &Lock{h: h}, nil
}

// Obtain takes the lock called name for ttl, waiting while another owner
// holds it, without polling: the holder's release hands the lock over, or
// wakes a waiter to try again (see the package doc). Whatever was lost
// meanwhile, a waiter finds a free lock within about a second, and it rides
// out Redis failures while it waits.
//
// A Redis failure on the first attempt is returned at once. When ctx ends
// first, the error matches both ErrNotObtained and ctx.Err(); when the
// Locker is closed, ErrClosed. When three grants in a row come back after
// their lease deadline (a ttl shorter than the round trip), Obtain releases
// them and returns ErrLateGrant rather than try forever.
//
// ctx bounds each Redis call only on a go-redis client with
// ContextTimeoutEnabled: without it, a wait whose ctx ends while Redis is
// stalled returns when the call under way does (docs/waiting.md).
func (l *Locker) Obtain(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	l.mustExist("Obtain")
	h, err := l.core.Obtain(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	return &Lock{h: h}, nil
}

// Do obtains the lock called name (waiting like Obtain), runs fn while
// refreshing the lease every ttl/3, and releases the lock when fn returns.
//
// fn's context is cancelled, with a cause matching ErrLockLost, as soon as the
// lease can no longer be confirmed before its Deadline: a refresh found the key
// deleted or taken, or Redis could not be reached in time. fn should stop its
// work then; Do's error matches ErrLockLost. fn's context compares the
// Deadline with the clock whenever fn looks at it (Err, Done), so a process
// resumed from a pause past the Deadline finds it cancelled at its first look;
// a context derived from it learns a moment later. Cancellation only narrows
// the window: a holder can still pause right after its last check.
//
// The release runs on a context of its own, bounded to a few seconds, so that
// it happens even when ctx has ended. If fn panics, the refreshes stop, the
// lock is released, and the panic goes on up the stack unchanged. A nil fn is
// an error, before anything is acquired.
func (l *Locker) Do(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context) error) error {
	l.mustExist("Do")
	if fn == nil {
		return nilFunc("Do")
	}
	return l.core.Do(ctx, name, ttl, func(ctx context.Context, _ *lease.Held) error { return fn(ctx) })
}

// Once runs fn at most once per period for name across every process sharing
// the Redis: cron-style deduplication. The first caller takes the lock for
// period and runs fn, and Once returns true with fn's error. A caller that
// finds the lock taken returns false, nil. One whose grant came back after its
// lease deadline (a ttl too short for the link) releases it and returns false
// with ErrLateGrant, since nobody runs fn for that grant; one whose ctx had
// ended returns false with an error matching ErrNotObtained and ctx.Err().
//
// The lock is not released when fn returns, so a replica whose timer fires late
// for the same tick still skips. While fn runs past the period the lock is kept
// alive (and released as soon as that long run ends); losing it cancels fn's
// context with cause ErrLockLost, as in Do. A panic in fn ends the run as a
// return would (the lock is kept to the end of the period, not refreshed),
// and goes on up the stack. A nil fn is an error, before anything is
// acquired.
func (l *Locker) Once(ctx context.Context, name string, period time.Duration, fn func(ctx context.Context) error) (ran bool, err error) {
	l.mustExist("Once")
	if fn == nil {
		return false, nilFunc("Once")
	}
	return l.core.Once(ctx, name, period, func(ctx context.Context, _ *lease.Held) error { return fn(ctx) })
}

// mustExist panics, naming the method op, when l is nil: a method of a nil
// *Locker would otherwise die of a bare nil dereference.
func (l *Locker) mustExist(op string) {
	if l == nil {
		lease.PanicNil("efficiency", "Locker", op)
	}
}

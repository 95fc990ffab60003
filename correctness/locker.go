package correctness

import (
	"context"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/telemetry"
	"github.com/redis/go-redis/v9"
)

// Locker grants correctness locks, each with a fencing token. It is safe for
// concurrent use; create one per process and Close it when done.
// A method of a nil *Locker panics with a message that names it.
type Locker struct {
	conn port.Conn
	opts options
	core *lease.Core

	audit   sync.Mutex
	audited bool

	// closing ends with Close, and with it the Observe calls under way.
	closing  context.Context
	closeAll context.CancelFunc
	// watches are the elections observed, by name (observe.go).
	watchMu sync.Mutex
	watches map[string]*watch
}

// New returns a Locker that runs its locks through client, which may be a
// *redis.Client, *redis.ClusterClient or any other UniversalClient. It panics
// if client is nil, as net/http does for a nil handler: that is a bug in the
// caller, found at once rather than at the first lock. It also panics if
// WithExpiringCounter is set while WithClockFloor(false) is: without the
// clock floor an expired counter would start tokens again from 1.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	if lease.IsNilClient(client) {
		panic("correctness: New: nil redis client")
	}
	return newLocker("New", port.GoRedis(client), opts)
}

// Conn is a client of another Redis library than go-redis, adapted for
// leasekit, as [github.com/leasekit/leasekit/efficiency.Conn] says: the
// same type, which serves both kinds. Pass it to NewConn or NewRegisterConn.
type Conn = port.Conn

// NewConn returns a Locker that runs its locks through conn, a client of
// another library than go-redis (see Conn): the Locker is New's in all but
// the client. It panics if conn is nil, and where New would.
func NewConn(conn Conn, opts ...Option) *Locker {
	if conn == nil {
		panic("correctness: NewConn: nil Conn")
	}
	return newLocker("NewConn", conn, opts)
}

// newLocker is New's and NewConn's Locker (fn names which), on conn.
func newLocker(fn string, conn port.Conn, opts []Option) *Locker {
	l := &Locker{conn: conn, opts: newOptions(opts)}
	l.closing, l.closeAll = context.WithCancel(context.Background())
	if l.opts.expiringCounter && !l.opts.clockFloor {
		panic("correctness: " + fn + ": WithExpiringCounter needs the clock floor, and WithClockFloor(false) turns it off")
	}
	l.opts.tel.Kind = "correctness"
	l.core = lease.New(lease.Config{
		Kind:        "correctness",
		Telemetry:   telemetry.New(l.opts.tel),
		TryOp:       "TryAcquire",
		WaitOp:      "Acquire",
		Conn:        l.conn,
		Prefix:      l.opts.prefix,
		DriftFactor: l.opts.drift,
		Owners:      l.opts.owners,
		Logger:      l.opts.logger,
		Errors: lease.Errors{
			NotObtained:   ErrNotObtained,
			Taken:         ErrTaken,
			NotHeld:       ErrNotHeld,
			LockLost:      ErrLockLost,
			InvalidKey:    ErrInvalidKey,
			InvalidTTL:    ErrInvalidTTL,
			Closed:        ErrClosed,
			Late:          ErrLateGrant,
			InvalidToken:  ErrInvalidToken,
			NotReplicated: ErrNotReplicated,
			NoToken:       ErrNoToken,
		},
		Fenced:          true,
		ClockFloor:      l.opts.clockFloor,
		ExpiringCounter: l.opts.expiringCounter,
		Tokens:          tokensOf(l.opts.tokens),
		Replicas:        l.opts.replicas,
		ReplicaWait:     l.opts.replicaWait,
	})
	return l
}

// Close makes every later TryAcquire, Acquire and Do fail with ErrClosed,
// and ends the Acquire calls still waiting with it, as
// [github.com/leasekit/leasekit/efficiency.Locker.Close] does; leases
// already held are not released. It also ends the Observe calls under way:
// their channels close.
func (l *Locker) Close() error {
	l.mustExist("Close")
	l.closeAll()
	return l.core.Close()
}

// auditOnce runs Audit after the first acquire that reached Redis, and logs
// what is not OK. An acquire that could not reach Redis leaves it to the
// next one: the audit could not have run either.
func (l *Locker) auditOnce(ctx context.Context, err error) {
	if !l.opts.audit || err != nil && !lease.ReachedRedis(err) {
		return
	}
	l.audit.Lock()
	defer l.audit.Unlock()
	if l.audited {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	findings, aerr := l.Audit(ctx)
	if aerr != nil {
		l.opts.logger.Warn("correctness: the deployment audit could not run; the next acquire tries again", "err", aerr)
		return
	}
	l.audited = true
	for _, f := range findings {
		if f.Status != StatusOK {
			l.opts.logger.Warn("correctness: audit: "+f.Check+" "+f.Status.String(),
				"check", f.Check, "status", f.Status.String(), "detail", f.Detail)
		}
	}
}

// auditTimeout bounds the audit of the first acquire.
const auditTimeout = 5 * time.Second

// TryAcquire makes one attempt to take the lock called name for ttl, with a
// new fencing token. It fails as
// [github.com/leasekit/leasekit/efficiency.Locker.TryObtain] does, and also
// with ErrInvalidToken (a fence counter without a token), ErrNotReplicated
// (WithReplicas: too few replicas confirmed) and ErrNoToken (WithTokens: no
// token from the source).
func (l *Locker) TryAcquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	l.mustExist("TryAcquire")
	h, err := l.core.Try(ctx, name, ttl)
	l.auditOnce(ctx, err)
	if err != nil {
		return nil, err
	}
	return &Lease{h: h}, nil
}

// Acquire takes the lock called name for ttl, with a new fencing token,
// waiting while another owner holds it. It waits, gives up and fails as
// [github.com/leasekit/leasekit/efficiency.Locker.Obtain] does, and also
// with TryAcquire's ErrInvalidToken, ErrNotReplicated and ErrNoToken (a
// waiter does not wait out an outage of its token source). A lock that its
// holder's release hands over comes with a new token.
func (l *Locker) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lease, error) {
	l.mustExist("Acquire")
	h, err := l.core.Obtain(ctx, name, ttl)
	l.auditOnce(ctx, err)
	if err != nil {
		return nil, err
	}
	return &Lease{h: h}, nil
}

// Do acquires the lock called name (waiting like Acquire), runs fn with the
// grant's fencing token while refreshing the lease, and releases the lock
// when fn returns, as [github.com/leasekit/leasekit/efficiency.Locker.Do]
// does: when the lease is lost, fn's context is cancelled with a cause
// matching ErrLockLost. fn must pass token to every fenced write.
// Cancellation only narrows the window: a holder can still pause right after
// its last check, and the fence is what rejects a write made after the lease
// was lost.
func (l *Locker) Do(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context, token uint64) error) error {
	l.mustExist("Do")
	if fn == nil {
		return nilFunc("Do")
	}
	h, err := l.core.Obtain(ctx, name, ttl)
	l.auditOnce(ctx, err)
	if err != nil {
		return err
	}
	return h.HoldAs(ctx, "Do", func(ctx context.Context, h *lease.Held) error { return fn(ctx, h.Token()) })
}

// mustExist panics, naming the method op, when l is nil: a method of a nil
// *Locker would otherwise die of a bare nil dereference.
func (l *Locker) mustExist(op string) {
	if l == nil {
		lease.PanicNil("correctness", "Locker", op)
	}
}

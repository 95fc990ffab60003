package correctness

import (
	"io"
	"log/slog"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/telemetry"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures a Locker or a Register.
type Option func(*options)

type options struct {
	prefix      string
	drift       float64
	logger      *slog.Logger
	owners      io.Reader
	replicas    int
	replicaWait time.Duration
	clockFloor  bool
	audit       bool

	expiringCounter bool
	tokens          TokenSource
	tel             telemetry.Config
}

// WithPrefix sets the prefix of every Redis key and channel the Locker or
// Register uses. Default: "leasekit:". A lock called name lives at
// <prefix>{name}, its token counter at <prefix>{name}:fence, and the register
// of a resource at <prefix>{resource}:register.
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithDriftFactor sets the share of a ttl that a Lease's Deadline keeps in
// reserve for clock drift between client and server; 2 ms more are always
// kept, but never more than half the ttl. Default: 0.01. Values outside
// [0, 0.5] are clamped.
func WithDriftFactor(f float64) Option { return func(o *options) { o.drift = f } }

// WithLogger sets the logger for the audit's findings and for warnings (a
// refresh that failed and is being retried, a lost subscription). Default:
// slog.Default(), because the audit's warnings are the point: pass a logger
// with a discarding handler, or WithAudit(false), to silence them. Owner ids
// are never logged in full.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithOwnerSource sets the reader that owner ids are drawn from, 16 bytes per
// acquire. Default: crypto/rand. A read that fails makes the acquire fail;
// there is no weaker fallback.
//
// The source must be unpredictable and never shared: an owner id is what
// proves a grant is yours. Redis tells a holder from a retried acquire only
// by its owner id, so two Lockers that draw the same ids (a seeded math/rand,
// say) both acquire the same lock with the same token, which every fence
// accepts from both. Use a cryptographic source, one per Locker, or none.
func WithOwnerSource(r io.Reader) Option { return func(o *options) { o.owners = r } }

// WithReplicas makes every acquire wait, on the same connection and in the same
// round trip, until n replicas have confirmed the grant (Redis WAIT), at most
// timeout. When fewer confirm, the grant is released and the acquire fails
// with ErrNotReplicated. Waiters still queue: a grant handed over by another
// holder's release is confirmed by the waiter in one more round trip (it
// refreshes the lease and WAITs), and is released and fails the same way when
// fewer replicas confirm. This narrows, but does not close, the window in
// which a failover loses a grant: WAIT does not make Redis strongly
// consistent. Default: 0 (no waiting). n < 0 is treated as 0.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(o *options) { o.replicas, o.replicaWait = max(n, 0), timeout }
}

// WithClockFloor sets whether a new token is at least the server's clock in
// microseconds (max(counter + 1, clock)). Default: true. With it, tokens stay
// monotonic when the counter is lost (a restart without persistence, an
// eviction, a failover), unless the server clock jumps back further than the
// outage lasted. Turn it off only to get small sequential tokens, and only on
// a Redis whose persistence you trust.
func WithClockFloor(on bool) Option { return func(o *options) { o.clockFloor = on } }

// WithExpiringCounter sets whether a lock's fence counter key expires with the
// lease that last drew a token from it, instead of living forever. Default:
// false.
//
// Every lock name has a counter key, <prefix>{name}:fence, and by default it
// is never deleted: a program that locks ever new names (one per user, per
// order) grows Redis without bound. With the clock floor on, an expired
// counter is exactly the loss the floor already handles: the next token is
// the server clock in microseconds, still greater than every token before it
// unless the server clock went back meanwhile. What you give up is the
// counter's guard against that: a clock that steps back while the lock is
// free can issue a token lower than one already used. Use it for dynamic
// names on a server whose clock is kept by NTP without steps; keep the
// default for a few long-lived names. New panics if it is combined with
// WithClockFloor(false), under which an expired counter would restart tokens
// at 1.
func WithExpiringCounter(on bool) Option { return func(o *options) { o.expiringCounter = on } }

// WithMeterProvider sets where the Locker's (or the Register's) metrics go
// (see the package doc for what they measure). Default: the global provider,
// otel.GetMeterProvider, which records nothing until a program installs an
// SDK.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.tel.MeterProvider = mp }
}

// WithTracerProvider sets where the Locker's spans go. Default: the global
// provider, otel.GetTracerProvider; until a program installs an SDK there,
// no span is even started.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tel.TracerProvider = tp }
}

// WithLockNameAttribute adds the attribute leasekit.lock.name to the
// Locker's metrics and spans, with the value name returns for a lock's name
// ("" leaves it out). Lock names are not attributes by default: a program
// that makes names up as it goes (one per user) would make a metric series
// per name. Map them to a bounded set here, such as the name without its
// id. Default: none.
func WithLockNameAttribute(name func(lock string) string) Option {
	return func(o *options) { o.tel.NameAttribute = name }
}

// WithAudit sets whether the first Acquire or TryAcquire of a Locker runs
// Audit and logs every finding that is not OK at Warn level. Default: true.
func WithAudit(on bool) Option { return func(o *options) { o.audit = on } }

func newOptions(opts []Option) options {
	o := options{prefix: lease.DefaultPrefix, drift: lease.DefaultDriftFactor, clockFloor: true, audit: true}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	o.drift = lease.DriftFactor(o.drift)
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o
}

package correctness

import (
	"github.com/leasekit/leasekit/internal/lease"
	"io"
	"log/slog"
	"time"
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
}

// WithPrefix sets the prefix of every Redis key and channel. Default:
// "leasekit:". A lock called name lives at <prefix>{name}, its token counter at
// <prefix>{name}:fence, and the register of a resource at
// <prefix>{resource}:register.
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithDriftFactor sets the share of a ttl that a Lease's Deadline keeps in
// reserve for clock drift; 2 ms more are always kept. Default: 0.01. Values
// outside [0, 0.5] are clamped.
func WithDriftFactor(f float64) Option { return func(o *options) { o.drift = f } }

// WithLogger sets the logger for the audit's findings and for warnings.
// Default: slog.Default(), because the audit's warnings are the point: pass a
// logger with a discarding handler, or WithAudit(false), to silence them.
// Owner ids are never logged in full.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithOwnerSource sets the reader that owner ids are drawn from, 16 bytes per
// grant. Default: crypto/rand. A read that fails makes the acquire fail.
func WithOwnerSource(r io.Reader) Option { return func(o *options) { o.owners = r } }

// WithReplicas makes every acquire wait, on the same connection and in the same
// round trip, until n replicas have confirmed the grant (Redis WAIT), at most
// timeout. When fewer confirm, the grant is released and the acquire fails
// with ErrNotReplicated. This narrows, but does not close, the window in which
// a failover loses a grant: WAIT does not make Redis strongly consistent.
// Default: 0 (no waiting). n < 0 is treated as 0.
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

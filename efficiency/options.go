package efficiency

import (
	"github.com/leasekit/leasekit/internal/lease"
	"io"
	"log/slog"
)

// Option configures a Locker.
type Option func(*options)

type options struct {
	prefix string
	drift  float64
	logger *slog.Logger
	owners io.Reader
}

// WithPrefix sets the prefix of every Redis key and channel the Locker uses.
// Default: "leasekit:". A lock called name lives at <prefix>{name}.
func WithPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// WithDriftFactor sets the share of a ttl that a Lock's Deadline keeps in
// reserve for clock drift between client and server; 2 ms more are always
// kept, but never more than half the ttl. Default: 0.01. Values outside
// [0, 0.5] are clamped.
func WithDriftFactor(f float64) Option { return func(o *options) { o.drift = f } }

// WithLogger sets the logger for warnings (a refresh that failed and is being
// retried, a lost subscription). Default: none. Owner ids are never logged in
// full.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithOwnerSource sets the reader that owner ids are drawn from, 16 bytes per
// grant. Default: crypto/rand. A read that fails makes the acquire fail; there
// is no weaker fallback.
func WithOwnerSource(r io.Reader) Option { return func(o *options) { o.owners = r } }

func newOptions(opts []Option) options {
	o := options{prefix: lease.DefaultPrefix, drift: lease.DefaultDriftFactor}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	o.drift = lease.DriftFactor(o.drift)
	return o
}

package efficiency

import (
	"io"
	"log/slog"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/telemetry"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures a Locker.
type Option func(*options)

type options struct {
	prefix string
	drift  float64
	logger *slog.Logger
	owners io.Reader
	tel    telemetry.Config
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
// acquire. Default: crypto/rand. A read that fails makes the acquire fail;
// there is no weaker fallback.
//
// The source must be unpredictable and never shared: an owner id is what
// proves a grant is yours. Redis tells a holder from a retried acquire only
// by its owner id, so two Lockers that draw the same ids (a seeded math/rand,
// say) both "obtain" the same lock, and either can release or refresh the
// other's. Use a cryptographic source, one per Locker, or none.
func WithOwnerSource(r io.Reader) Option { return func(o *options) { o.owners = r } }

// WithMeterProvider sets where the Locker's metrics go (see the package doc
// for what it measures). Default: the global provider, otel.GetMeterProvider,
// which records nothing until a program installs an SDK.
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

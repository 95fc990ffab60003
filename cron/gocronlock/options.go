package gocronlock

import (
	"log/slog"
	"time"
)

// Option configures a Locker.
type Option func(*options)

type options struct {
	minHold time.Duration
	logger  *slog.Logger
}

// WithMinHold sets the minimum hold: how long after a lock is taken Unlock
// keeps it, so that a scheduler whose clock is behind does not run the same
// tick again (see the package doc for how to choose it). Default: 1s. A value
// under 1 ms is not replaced by the default: every Lock then fails with
// efficiency.ErrInvalidTTL.
func WithMinHold(d time.Duration) Option { return func(o *options) { o.minHold = d } }

// WithLogger sets the logger for what Unlock reports and gocron discards: a
// lease lost while the job ran, or a release that failed. Default: none.
// Owner ids are never logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

func newOptions(opts []Option) options {
	o := options{minHold: time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	return o
}

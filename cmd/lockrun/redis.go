package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// pingTimeout bounds the first contact with Redis, so that an unreachable
// server is reported at once rather than after go-redis's dial timeouts and
// retries.
const pingTimeout = 3 * time.Second

// quietRedis discards go-redis's own log lines (a failed dial, once per
// retry): lockrun reports the failure once, in its own words.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// newClient returns a client of the Redis in opts that spends no round trip
// the lock does not need: its first command dials, and a connection's
// set-up is one HELLO, without go-redis's CLIENT SETINFO (a library name in
// CLIENT LIST) and CLIENT MAINT_NOTIFICATIONS (for endpoints that move
// during maintenance, which a process that lives for one command can do
// without: a moved connection is re-dialled). No PING goes first: the first
// lock command is the first contact, which clientHook bounds.
func newClient(opts *redis.Options) *redis.Client {
	opts.DisableIdentity = true
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	client := redis.NewClient(opts)
	client.AddHook(&clientHook{deadline: time.Now().Add(pingTimeout)})
	return client
}

// clientHook is lockrun's go-redis hook. It bounds the commands sent before
// Redis first answers one (with the dials and the handshake they wait for)
// by one deadline, and marks their failures unreachable. And it gives a
// pipeline's error to its commands when none has one of its own: go-redis
// leaves them unset when the connection's handshake got an error reply (a
// wrong password), and lockrun reads each command's error of a pipeline.
type clientHook struct {
	deadline time.Time
	answered atomic.Bool
}

// unreachableError is a command's failure before Redis had ever answered.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// unreachable reports whether err holds a failure before Redis first
// answered.
func unreachable(err error) bool {
	_, ok := errors.AsType[*unreachableError](err)
	return ok
}

func (h *clientHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *clientHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.contact(ctx, func(ctx context.Context) error { return next(ctx, cmd) })
	}
}

func (h *clientHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := h.contact(ctx, func(ctx context.Context) error { return next(ctx, cmds) })
		if err != nil && !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Err() != nil }) {
			for _, c := range cmds {
				c.SetErr(err)
			}
		}
		return err
	}
}

// contact runs send, bounded by the deadline until Redis has answered.
func (h *clientHook) contact(ctx context.Context, send func(context.Context) error) error {
	if h.answered.Load() {
		return send(ctx)
	}
	ctx, cancel := context.WithDeadline(ctx, h.deadline)
	defer cancel()
	err := send(ctx)
	if err == nil || lease.IsServerReply(err) {
		h.answered.Store(true)
		return err
	}
	return &unreachableError{err}
}

// refused reports an error by which Redis turned lockrun away (a wrong or
// missing password, an ACL user without a command lockrun needs), or returns
// nil. Those are not outages: retrying will not help until the
// configuration changes, so they get their own status. Redis's replies
// (WRONGPASS, NOAUTH, NOPERM) never quote the password.
func refused(opts *redis.Options, err error) error {
	switch {
	case redis.IsAuthError(err):
		return exitf(exitNoPerm, "Redis at %s refused the credentials (the user and password of -redis or $%s): %w", address(opts), redisURLEnv, err)
	case redis.IsPermissionError(err):
		return exitf(exitNoPerm, "Redis at %s refused a command to this user (see the ACL leasekit needs in the README): %w", address(opts), err)
	}
	return nil
}

// address names the Redis in opts for a message: host and port (or socket),
// database and TLS, never the user name or password.
func address(opts *redis.Options) string {
	a := opts.Addr
	if opts.DB != 0 {
		a += " db " + strconv.Itoa(opts.DB)
	}
	if opts.TLSConfig != nil {
		a += " (TLS)"
	}
	return a
}

// unavailable reports a Redis failure: one before Redis ever answered, one
// after, or Redis turning lockrun away (see refused).
func unavailable(opts *redis.Options, err error) error {
	switch e := refused(opts, err); {
	case e != nil:
		return e
	case unreachable(err):
		return exitf(exitUnavailable, "cannot reach Redis at %s: %w", address(opts), err)
	}
	return exitf(exitUnavailable, "Redis at %s failed: %w", address(opts), err)
}

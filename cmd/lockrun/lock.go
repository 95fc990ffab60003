package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/redis/go-redis/v9"
)

// Variables of the command's environment. oldNameEnv is the name's former
// variable, set as well for commands written before it was renamed (it held
// a name, not a Redis key).
const (
	nameEnv    = "LEASEKIT_NAME"
	oldNameEnv = "LEASEKIT_KEY"
	tokenEnv   = "LEASEKIT_TOKEN"
)

// lockErrors are the sentinel errors of the kind of lock lockrun takes;
// corrupt, when the kind has one, says a key holds what leasekit never writes.
type lockErrors struct {
	notObtained, lost, corrupt error
}

var (
	efficiencyErrors  = lockErrors{efficiency.ErrNotObtained, efficiency.ErrLockLost, nil}
	correctnessErrors = lockErrors{correctness.ErrNotObtained, correctness.ErrLockLost, correctness.ErrInvalidToken}
)

// failed turns an error of taking the lock into lockrun's: 65 when a key of
// the lock holds what leasekit never writes (a value of another type, a
// fence counter that holds no token), as -status reports it; else what
// unavailable says.
func failed(cfg config, errs lockErrors, err error) error {
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE") || errs.corrupt != nil && errors.Is(err, errs.corrupt):
		return exitf(exitDataErr, "%s: a key of the %s holds what leasekit does not write (see lockrun -status): %w", cfg.subject(), cfg.kind(), err)
	case errors.Is(err, efficiency.ErrLimitMismatch):
		return exitf(exitUsage, "-n %d: %w: every run of %q must pass the same -n while its permits are held", cfg.limit, err, cfg.name)
	}
	return unavailable(cfg.redis, err)
}

// lockAndRun takes the lock the flags ask for and runs the command under it.
// It returns the command's exit status, or an error that carries lockrun's.
func lockAndRun(ctx context.Context, client *redis.Client, cfg config, env []string, std stdio) (int, error) {
	logger := newLogger(std.err)
	cmd := command{argv: cfg.command, env: childEnv(env, cfg.name, 0), stdio: std, grace: cfg.grace}
	switch {
	case cfg.once > 0:
		l := efficiency.New(client, efficiency.WithPrefix(cfg.prefix), efficiency.WithLogger(logger))
		defer l.Close()
		return runOnce(ctx, l, cfg, cmd, logger)
	case cfg.limit > 0:
		l := efficiency.New(client, efficiency.WithPrefix(cfg.prefix), efficiency.WithLogger(logger))
		defer l.Close()
		s := l.Semaphore(cfg.name, cfg.limit)
		try := func(ctx context.Context, _ string, ttl time.Duration) (*efficiency.Lock, error) {
			return s.TryAcquire(ctx, ttl)
		}
		wait := func(ctx context.Context, _ string, ttl time.Duration) (*efficiency.Lock, error) {
			return s.Acquire(ctx, ttl)
		}
		return takeAndRun(ctx, cfg, cmd, efficiencyErrors, logger, try, wait, nil, (*efficiency.Lock).Hold)
	case cfg.fenced:
		// The audit's findings go to stderr: they are the warnings a fenced
		// user must see, once; -audit=false stops them being mailed by cron
		// on every run after that.
		l := correctness.New(client, correctness.WithPrefix(cfg.prefix), correctness.WithLogger(logger),
			correctness.WithAudit(cfg.audit))
		defer l.Close()
		return takeAndRun(ctx, cfg, cmd, correctnessErrors, logger, l.TryAcquire, l.Acquire,
			func(lease *correctness.Lease) []string { return childEnv(env, cfg.name, lease.Token()) },
			func(lease *correctness.Lease, ctx context.Context, fn func(context.Context) error) error {
				return lease.Hold(ctx, func(ctx context.Context, _ uint64) error { return fn(ctx) })
			})
	default:
		l := efficiency.New(client, efficiency.WithPrefix(cfg.prefix), efficiency.WithLogger(logger))
		defer l.Close()
		return takeAndRun(ctx, cfg, cmd, efficiencyErrors, logger, l.TryObtain, l.Obtain, nil, (*efficiency.Lock).Hold)
	}
}

// acquireFunc is TryObtain, Obtain, TryAcquire or Acquire.
type acquireFunc[L any] func(ctx context.Context, name string, ttl time.Duration) (L, error)

// holdFunc is Lock.Hold or Lease.Hold: run fn while the lease is refreshed,
// cancel it when the lease is lost, release at the end.
type holdFunc[L any] func(lock L, ctx context.Context, fn func(context.Context) error) error

// takeAndRun takes the lock with try (-wait 0) or wait, and runs cmd while
// holding it. env, if not nil, gives the command's environment for the grant.
func takeAndRun[L any](ctx context.Context, cfg config, cmd command, errs lockErrors, logger *slog.Logger,
	try, wait acquireFunc[L], env func(L) []string, hold holdFunc[L]) (int, error) {
	var lock L
	var err error
	if cfg.wait == 0 {
		lock, err = try(ctx, cfg.name, cfg.ttl)
	} else {
		wctx, cancel := context.WithTimeout(ctx, cfg.wait)
		lock, err = wait(wctx, cfg.name, cfg.ttl)
		cancel()
	}
	switch {
	case unreachable(err):
		// Before "held": a wait that ended while Redis had not answered
		// yet says nothing of the lock, and cron would take 75 for a skip.
		return 0, failed(cfg, errs, err)
	case errors.Is(err, errs.notObtained) && cfg.wait > 0:
		return skipped(cfg, "%s after waiting %v", cfg.busy("still "), cfg.wait)
	case errors.Is(err, errs.notObtained):
		return skipped(cfg, "%s", cfg.busy(""))
	case err != nil:
		return 0, failed(cfg, errs, err)
	}
	if env != nil {
		cmd.env = env(lock)
	}
	var code int
	err = hold(lock, ctx, func(ctx context.Context) (err error) {
		code, err = cmd.run(ctx)
		return err
	})
	return code, ended(cfg, errs, logger, code, err)
}

// runOnce runs cmd at most once per period (-once).
func runOnce(ctx context.Context, l *efficiency.Locker, cfg config, cmd command, logger *slog.Logger) (int, error) {
	var code int
	ran, err := l.Once(ctx, cfg.name, cfg.once, func(ctx context.Context) (err error) {
		code, err = cmd.run(ctx)
		return err
	})
	switch {
	case !ran && err == nil:
		return skipped(cfg, "%q already ran in this period (-once %v), or is running", cfg.name, cfg.once)
	case !ran:
		return 0, failed(cfg, efficiencyErrors, err)
	}
	return code, ended(cfg, efficiencyErrors, logger, code, err)
}

// skipped ends a run that did not get the lock: exit 75, with a message on
// stderr unless -quiet, for which a skip is an ordinary outcome (a cron tick
// that another machine took) and not worth a mail.
func skipped(cfg config, format string, a ...any) (int, error) {
	if cfg.quiet {
		return exitNotObtained, nil
	}
	return exitNotObtained, exitf(exitNotObtained, format, a...)
}

// ended turns what holding the lock returned into lockrun's error, if any: a
// lost lease (74), a command that could not start (126, 127). A release that
// failed only for want of Redis is a warning: the command ran under the lock,
// and the lock expires with its lease.
func ended(cfg config, errs lockErrors, logger *slog.Logger, code int, err error) error {
	_, cannotRun := errors.AsType[*exitError](err)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errs.lost):
		return exitf(exitLost, "%s was lost while the command ran; the command exited with status %d: %w", cfg.subject(), code, err)
	case cannotRun:
		return err
	}
	logger.Warn("lockrun: releasing the lock failed; it expires with its lease", "lock", cfg.name, "err", err)
	return nil
}

// childEnv is the command's environment: lockrun's, with LEASEKIT_NAME set
// to the lock's name and LEASEKIT_TOKEN to the fencing token when there is
// one. Inherited values are dropped, so that a nested lockrun's command never
// sees an outer lease's token as its own.
func childEnv(env []string, name string, token uint64) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != nameEnv && k != oldNameEnv && k != tokenEnv {
			out = append(out, kv)
		}
	}
	out = append(out, nameEnv+"="+name, oldNameEnv+"="+name)
	if token != 0 {
		out = append(out, tokenEnv+"="+strconv.FormatUint(token, 10))
	}
	return out
}

// subject names what the run holds: the lock, or a permit of the
// semaphore.
func (c config) subject() string {
	if c.limit > 0 {
		return fmt.Sprintf("a permit of semaphore %q", c.name)
	}
	return fmt.Sprintf("lock %q", c.name)
}

// kind is "semaphore" or "lock".
func (c config) kind() string {
	if c.limit > 0 {
		return "semaphore"
	}
	return "lock"
}

// busy says why a run found no room: still, "" or "still ".
func (c config) busy(still string) string {
	if c.limit > 0 {
		return fmt.Sprintf("all %d permits of semaphore %q are %sheld", c.limit, c.name, still)
	}
	return fmt.Sprintf("lock %q is %sheld by another owner", c.name, still)
}

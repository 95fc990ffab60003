// Package lease is the engine shared by leasekit's two kinds of lock: acquiring
// with a one-round-trip script, waiting for a release, lease deadlines on the
// monotonic clock, refresh, release, and holding a lease while a function runs.
//
// The public packages efficiency and correctness configure it with their own
// acquire script and their own sentinel errors.
package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/redis/go-redis/v9"
)

// Errors are the sentinel errors of the package using the engine, so that its
// callers can test them with errors.Is.
type Errors struct {
	NotObtained error
	NotHeld     error
	LockLost    error
	InvalidKey  error
	InvalidTTL  error
}

// Attempt is what one acquire round trip found.
type Attempt struct {
	// Granted is true when the lock is the caller's.
	Granted bool
	// Value is what the grant stored in the lock key, when Granted.
	Value string
	// Token is the grant's fencing token (correctness locks only).
	Token uint64
	// HolderTTL is the holder's remaining ttl when not Granted; negative when
	// the holder's key has no expiry.
	HolderTTL time.Duration
}

// Mode says what an acquire attempt must find out beyond "granted".
type Mode int

const (
	// Try is a lone attempt: when not granted, it must be sure the lock is
	// not the caller's own from a retried call.
	Try Mode = iota
	// Probe is the first attempt of a wait: the cheapest, answering only
	// "granted" or "maybe not"; the Wait attempt that follows settles it.
	Probe
	// Wait is an attempt of a waiter: it must also bring the holder's ttl.
	Wait
)

// AcquireFunc runs one acquire round trip on the lock whose Redis key is key
// (two for a Try that finds the lock held, where the lock's kind needs it).
type AcquireFunc func(ctx context.Context, key, owner string, ttl time.Duration, mode Mode) (Attempt, error)

// Config configures a Core.
type Config struct {
	Client      redis.UniversalClient
	Prefix      string
	DriftFactor float64
	Owners      io.Reader // nil: crypto/rand
	Logger      *slog.Logger
	Errors      Errors
	Acquire     AcquireFunc
	// Mine returns what identifies the caller's grant in the lock's value when
	// only the owner id is known: the whole value, or (prefix true) its start.
	// Used to release a grant whose reply was lost.
	Mine func(owner string) (value string, prefix bool)
}

// Core runs locks of one kind for one Locker.
type Core struct {
	cfg      Config
	notifier *notify.Notifier
}

// New returns a Core. The caller has validated cfg.
func New(cfg Config) *Core {
	return &Core{cfg: cfg, notifier: notify.New(cfg.Client)}
}

// Close stops the wake-up subscription. Waiting Obtains return ErrNotObtained.
func (c *Core) Close() error { return c.notifier.Close() }

// Drift is the safety margin taken off a lease of length ttl: the clock drift
// between client and server (DriftFactor of ttl) plus 2 ms for Redis's expiry
// precision, but at most half the ttl, so that a lease of a few milliseconds
// is still usable for half its length.
func (c *Core) Drift(ttl time.Duration) time.Duration {
	return min(time.Duration(float64(ttl)*c.cfg.DriftFactor)+2*time.Millisecond, ttl/2)
}

func (c *Core) check(name string, ttl time.Duration) error {
	if err := CheckName(c.cfg.Errors.InvalidKey, name); err != nil {
		return err
	}
	return CheckTTL(c.cfg.Errors.InvalidTTL, ttl)
}

// attempt runs one acquire and, when granted, returns the lease.
//
// Two outcomes would leave a grant the caller cannot use, and are undone: an
// acquire whose reply was lost (a network error or the end of ctx: Redis may
// have granted it), and a grant whose reply came after its lease deadline.
// Neither is reported as obtained, and neither leaves the caller's owner id in
// the key for the next owner to wait out.
func (c *Core) attempt(ctx context.Context, key, owner string, ttl time.Duration, mode Mode) (*Held, Attempt, error) {
	sent := time.Now()
	a, err := c.cfg.Acquire(ctx, key, owner, ttl, mode)
	if err != nil {
		// Even an error reply may follow a grant: go-redis resends a command
		// whose reply was lost, and the resend can meet OOM or LOADING after
		// the first send landed. The release is scoped to this owner.
		c.abandon(ctx, key, owner, ttl)
		return nil, a, err
	}
	if !a.Granted {
		return nil, a, nil
	}
	deadline := sent.Add(ttl - c.Drift(ttl))
	if late := time.Since(deadline); late >= 0 {
		c.abandon(ctx, key, owner, ttl)
		return nil, a, fmt.Errorf("%w: %s: the grant's reply came %v after its lease deadline (ttl %v); released it: %w",
			c.cfg.Errors.NotObtained, Quote(key), late.Round(time.Millisecond), ttl, errLate)
	}
	h := &Held{
		core:     c,
		key:      key,
		value:    a.Value,
		token:    a.Token,
		deadline: deadline,
		ttl:      ttl,
	}
	return h, a, nil
}

// abandon releases the caller's grant, if Redis made one, after its reply was
// lost or came too late. Best effort: if Redis cannot be reached now either,
// the grant expires with its ttl.
func (c *Core) abandon(ctx context.Context, key, owner string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(ttl, time.Second))
	defer cancel()
	value, prefix := c.cfg.Mine(owner)
	if err := release(ctx, c.cfg.Client, key, value, prefix); err != nil && !IsServerReply(err) {
		c.logger().Warn("leasekit: could not release a grant whose reply was lost; it expires with its ttl",
			"key", key, "owner", Redact(owner), "ttl", ttl, "err", err)
	}
}

// errLate marks a grant whose reply came after its lease deadline: Try
// reports it, Obtain tries again.
var errLate = errors.New("late grant")

// IsServerReply reports whether err is an error reply from Redis (WRONGTYPE,
// NOPERM, OOM, an unknown command) rather than a failure to reach it: the
// command was refused, so it changed nothing.
func IsServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.ErrClosed)
}

// Try makes one attempt to acquire the lock called name.
func (c *Core) Try(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	if err := c.check(name, ttl); err != nil {
		return nil, err
	}
	owner, err := NewOwner(c.cfg.Owners)
	if err != nil {
		return nil, err
	}
	h, _, err := c.attempt(ctx, LockKey(c.cfg.Prefix, name), owner, ttl, Try)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: %s is held", c.cfg.Errors.NotObtained, Quote(name))
	}
	return h, nil
}

// Obtain acquires the lock called name, waiting until it is free or ctx ends.
//
// It first probes, as cheaply as a TryObtain: a free lock costs one round trip
// and no subscription. When the lock is held, the waiter joins the lock's
// wake-up queue (its subscription confirmed) and tries again, so that no
// release can slip between the failed probe and the wait; then it sleeps until
// a release wakes it or the holder's ttl runs out, and tries again.
func (c *Core) Obtain(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	if err := c.check(name, ttl); err != nil {
		return nil, err
	}
	owner, err := NewOwner(c.cfg.Owners)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(c.cfg.Errors.NotObtained, err)
	}
	key := LockKey(c.cfg.Prefix, name)
	h, _, err := c.attempt(ctx, key, owner, ttl, Probe)
	if errors.Is(err, errLate) {
		err = nil // released already; wait like any other waiter
	}
	if h != nil || err != nil {
		if err != nil && ctx.Err() != nil {
			err = errors.Join(c.cfg.Errors.NotObtained, ctx.Err(), err)
		}
		return h, err
	}
	w, err := c.notifier.Join(ctx, WakeChannel(key))
	woken, granted := false, false
	switch {
	case err == nil:
		defer func() {
			// A wake-up this waiter took but leaves without using goes to
			// the next waiter, or it would sleep out the holder's ttl.
			if woken && !granted {
				w.Unused()
			}
			w.Leave()
		}()
	case ctx.Err() != nil:
		return nil, errors.Join(c.cfg.Errors.NotObtained, ctx.Err())
	case errors.Is(err, notify.ErrClosed):
		return nil, fmt.Errorf("%w: the locker is closed", c.cfg.Errors.NotObtained)
	default:
		// Without wake-ups the holder's ttl still bounds the wait.
		c.logger().Warn("leasekit: cannot subscribe to lock releases; waiting on ttl alone",
			"key", key, "err", err)
	}
	for {
		h, a, err := c.attempt(ctx, key, owner, ttl, Wait)
		switch {
		case errors.Is(err, errLate) && ctx.Err() == nil:
			continue // released already; the wait goes on until ctx ends
		case err != nil:
			if ctx.Err() != nil {
				return nil, errors.Join(c.cfg.Errors.NotObtained, ctx.Err(), err)
			}
			return nil, err
		case h != nil:
			granted = true
			return h, nil
		}
		woken, err = c.sleep(ctx, w, a.HolderTTL)
		if err != nil {
			return nil, err
		}
	}
}

// sleep waits for a wake-up, the holder's ttl to run out, or ctx to end. It
// reports whether a wake-up ended it.
func (c *Core) sleep(ctx context.Context, w *notify.Waiter, holderTTL time.Duration) (bool, error) {
	var expiry <-chan time.Time
	if holderTTL >= 0 {
		t := time.NewTimer(holderTTL)
		defer t.Stop()
		expiry = t.C
	}
	var wake <-chan struct{}
	var closed <-chan struct{}
	if w != nil {
		wake, closed = w.Wake(), w.Done()
	} else if holderTTL < 0 {
		// No wake-ups and no expiry: check again after a second rather than
		// waiting on ctx alone.
		t := time.NewTimer(time.Second)
		defer t.Stop()
		expiry = t.C
	}
	select {
	case <-wake:
		return true, nil
	case <-expiry:
		return false, nil
	case <-closed:
		return false, fmt.Errorf("%w: the locker is closed", c.cfg.Errors.NotObtained)
	case <-ctx.Done():
		return false, errors.Join(c.cfg.Errors.NotObtained, ctx.Err())
	}
}

func (c *Core) logger() *slog.Logger {
	if c.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.cfg.Logger
}

// WrapRedis names the operation and key in a Redis error. A command refused by an
// ACL inside a script comes back as a generic ERR; it is marked NOPERM here, as
// Redis marks the same refusal outside a script, so that it reads as the
// permission problem it is.
func WrapRedis(op, key string, err error) error {
	if strings.Contains(err.Error(), "user executing the script can't run this command") {
		return fmt.Errorf("leasekit: %s %s: NOPERM: the ACL user may not run a command this operation's script needs "+
			"(the README lists the ACL leasekit needs): %w", op, Quote(key), err)
	}
	return fmt.Errorf("leasekit: %s %s: %w", op, Quote(key), err)
}

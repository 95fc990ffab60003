// Package lease is the engine shared by leasekit's two kinds of lock: acquiring
// in one round trip, waiting in the lock's queue for a release to hand it over
// (or for a wake-up, where waiters cannot queue), lease deadlines on the
// monotonic clock, refresh, release, and holding a lease while a function runs.
//
// The public packages efficiency and correctness configure it with their own
// acquire script and their own sentinel errors.
package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// InvalidToken is for a grant whose token is not a positive 64-bit
	// integer (fenced kinds only).
	InvalidToken error
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
	// Place is the waiter's place in the lock's queue (server microseconds)
	// when this attempt queued it; 0 when it did not.
	Place int64
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

// AcquireFunc runs one acquire round trip on the lock whose keys are k (two
// for a Try that finds the lock held, where the lock's kind needs it).
type AcquireFunc func(ctx context.Context, k *Keys, owner string, ttl time.Duration, mode Mode) (Attempt, error)

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
	// Fenced says the kind's grants carry a fencing token, drawn from the
	// lock's counter key, with the clock floor when ClockFloor is set.
	Fenced     bool
	ClockFloor bool
	// Replicated says a grant is used only once WAIT confirms it, which a
	// grant handed over by another holder's release cannot be: waiters do not
	// queue for a direct handoff.
	Replicated bool
}

// Core runs locks of one kind for one Locker.
type Core struct {
	cfg      Config
	notifier *notify.Notifier
	names    sync.Map     // lock name -> *Keys, for up to keyCacheSize names
	cached   atomic.Int64 // entries in names
	// grants is the channel on which this Core's waiters hear the lock handed
	// to them; "" when they do not queue.
	grants    string
	boxedKind any // kind(), as a script argument
	// wake is the release script's ARGV[4]: publish the wake-up for waiters
	// that do not queue, unless this Core's waiters queue.
	wake any
}

// New returns a Core. The caller has validated cfg.
//
// Waiters queue for a direct handoff (scripts/wait.lua) only on a
// *redis.Client, one server or a Sentinel-managed master: the release script
// skips a vanished waiter by PUBSUB NUMSUB of its channel, which counts only
// the subscribers of the server the script runs on. A ClusterClient's
// subscription may be on another node, and a Ring's on another shard, so
// their waiters wait for a wake-up and try again, as with WithReplicas.
func New(cfg Config) *Core {
	c := &Core{cfg: cfg, notifier: notify.New(cfg.Client)}
	c.boxedKind, c.wake = c.kind(), wakeOn
	if _, single := cfg.Client.(*redis.Client); single && !cfg.Replicated {
		c.grants = GrantChannel(cfg.Prefix, rand.Text())
		c.wake = wakeOff
	}
	return c
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

// attempt runs one acquire and, when granted, returns the lease. A waiter
// with a queue entry runs the wait script, which queues it when the lock is
// held.
//
// Two outcomes would leave a grant the caller cannot use, and are undone: an
// acquire whose reply was lost (a network error or the end of ctx: Redis may
// have granted it), and a grant whose reply came after its lease deadline.
// Neither is reported as obtained, and neither leaves the caller's owner id in
// the key for the next owner to wait out.
func (c *Core) attempt(ctx context.Context, lk *Keys, owner string, ttl time.Duration, mode Mode, entry string) (*Held, Attempt, error) {
	sent := time.Now()
	var a Attempt
	var err error
	if entry != "" {
		a, err = c.wait(ctx, lk, owner, ttl, entry)
	} else {
		a, err = c.cfg.Acquire(ctx, lk, owner, ttl, mode)
	}
	if err != nil {
		// Even an error reply may follow a grant: go-redis resends a command
		// whose reply was lost, and the resend can meet OOM or LOADING after
		// the first send landed; and an Acquire may refuse a grant it made
		// (correctness's WithReplicas, when WAIT falls short). The release is
		// scoped to this owner. A queued waiter's Obtain releases, and
		// leaves the queue, when it returns this error.
		if entry == "" {
			c.abandon(ctx, lk, owner, ttl, "")
		}
		return nil, a, err
	}
	if !a.Granted {
		return nil, a, nil
	}
	h, err := c.held(ctx, lk, owner, a, sent, ttl)
	return h, a, err
}

// held makes the lease of grant a, measured from start: a time no later than
// the grant. A grant whose deadline has passed already is released.
func (c *Core) held(ctx context.Context, lk *Keys, owner string, a Attempt, start time.Time, ttl time.Duration) (*Held, error) {
	deadline := start.Add(ttl - c.Drift(ttl))
	if late := time.Since(deadline); late >= 0 {
		c.abandon(ctx, lk, owner, ttl, "")
		return nil, fmt.Errorf("%w: %s: the grant's reply came %v after its lease deadline (ttl %v); released it: %w",
			c.cfg.Errors.NotObtained, Quote(lk.lock), late.Round(time.Millisecond), ttl, errLate)
	}
	return &Held{
		core:     c,
		keys:     lk,
		value:    a.Value,
		token:    a.Token,
		deadline: deadline,
		ttl:      ttl,
	}, nil
}

// wait runs one attempt of a queued waiter (scripts/wait.lua).
func (c *Core) wait(ctx context.Context, lk *Keys, owner string, ttl time.Duration, entry string) (Attempt, error) {
	reply, err := c.Run(ctx, waitScript, lk, 3, owner, Millis(ttl), entry, c.boxedKind).Slice()
	if err != nil {
		return Attempt{}, WrapRedis("acquire", lk.lock, err)
	}
	if len(reply) == 2 && (reply[0] == int64(1) || reply[0] == int64(2)) {
		if value, ok := reply[1].(string); ok {
			return c.Grant(lk.lock, owner, value)
		}
	}
	if len(reply) == 3 && reply[0] == int64(0) {
		left, ok1 := reply[1].(int64)
		place, ok2 := reply[2].(string)
		if ok1 && ok2 {
			a := Attempt{HolderTTL: time.Duration(left) * time.Millisecond}
			if place != "" {
				a.Place, err = strconv.ParseInt(place, 10, 64)
			}
			if err == nil {
				return a, nil
			}
		}
	}
	// %T, not %v: a grant reply holds the owner id.
	return Attempt{}, fmt.Errorf("leasekit: acquire %s: unexpected reply %T of %d elements", Quote(lk.lock), reply, len(reply))
}

// Grant reads a grant to owner whose stored value is value: for a fenced kind,
// "owner:token" with a positive 64-bit token.
func (c *Core) Grant(key, owner, value string) (Attempt, error) {
	if !c.cfg.Fenced {
		if value != owner {
			return Attempt{}, fmt.Errorf("leasekit: acquire %s: the grant holds another owner's id", Quote(key))
		}
		return Attempt{Granted: true, Value: value}, nil
	}
	digits, ok := strings.CutPrefix(value, owner+":")
	if !ok {
		return Attempt{}, fmt.Errorf("%w: %s: the grant carries no token", c.cfg.Errors.InvalidToken, Quote(key))
	}
	token, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || token == 0 {
		return Attempt{}, fmt.Errorf("%w: %s holds token %q, not a positive 64-bit integer: is the fence counter corrupt?",
			c.cfg.Errors.InvalidToken, Quote(key), digits)
	}
	return Attempt{Granted: true, Value: value, Token: token}, nil
}

// handed turns a grant message, "ticket token place seconds micros", into the
// lease: the lock, handed to this waiter by its holder's release (with token,
// or '-' for an efficiency grant) when the server clock read seconds and
// micros, is its own since that long after it queued at place (microseconds
// on the same clock). The lease is measured from the time the attempt that
// queued it was sent (queued), plus that wait. A wait longer than the one
// seen here means the server's clock stepped forward meanwhile; then only the
// send time is sure. A message for an earlier place is stale: nil, and the
// caller asks Redis again.
func (c *Core) handed(ctx context.Context, lk *Keys, owner string, ttl time.Duration, msg string, place int64, queued time.Time) (*Held, error) {
	f := strings.Fields(msg)
	if len(f) != 5 {
		return nil, nil
	}
	at, err1 := strconv.ParseFloat(f[2], 64)
	if err1 != nil || place == 0 || int64(at) != place {
		return nil, nil
	}
	// TIME's seconds and microseconds; seconds bounded so that the sum
	// cannot overflow.
	sec, err2 := strconv.ParseInt(f[3], 10, 64)
	usec, err3 := strconv.ParseInt(f[4], 10, 64)
	if err2 != nil || err3 != nil || sec < 0 || sec >= math.MaxInt64/1_000_000 || usec < 0 || usec >= 1_000_000 {
		return nil, nil
	}
	waited := sec*1_000_000 + usec - place
	value := owner
	if f[1] != "-" {
		value = owner + ":" + f[1]
	}
	a, err := c.Grant(lk.lock, owner, value)
	if err != nil {
		c.abandon(ctx, lk, owner, ttl, "")
		return nil, err
	}
	wait := time.Duration(max(waited, 0)) * time.Microsecond
	if wait > time.Since(queued) {
		wait = 0
	}
	return c.held(ctx, lk, owner, a, queued.Add(wait), ttl)
}

// abandon releases the caller's grant, if Redis made one, after its reply was
// lost or came too late, and takes the caller's queue entry leaving (if not
// "") out of the lock's queue. Best effort: if Redis cannot be reached now
// either, the grant expires with its ttl.
func (c *Core) abandon(ctx context.Context, lk *Keys, owner string, ttl time.Duration, leaving string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(ttl, time.Second))
	defer cancel()
	value, prefix := c.cfg.Mine(owner)
	if _, err := c.release(ctx, lk, value, prefix, leaving); err != nil && !IsServerReply(err) {
		c.logger().Warn("leasekit: could not release a grant it cannot use (its reply was lost or late, or its waiter gave up); it expires with its ttl",
			"key", lk.lock, "owner", Redact(owner), "ttl", ttl, "err", err)
	}
}

// errLate marks a grant whose reply came after its lease deadline: Try
// reports it, Obtain tries again, up to maxLateGrants in a row.
var errLate = errors.New("late grant")

// maxLateGrants is how many grants in a row may come back past their lease
// deadline before Obtain gives up: a ttl shorter than the round trip would
// otherwise have it grant and release in a loop until ctx ends.
const maxLateGrants = 3

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
	h, _, err := c.attempt(ctx, c.lockKeys(name), owner, ttl, Try, "")
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
// and no subscription. When the lock is held, the waiter subscribes (and waits
// for the confirmation) before it tries again, so that nothing the holder does
// after the failed probe goes unheard. On a single server that try queues the
// waiter, and the holder's release hands the lock straight to the first live
// waiter and tells it so: the handoff costs no round trip of the waiter's own.
// Elsewhere the release wakes one waiter per Locker, which tries again. Either
// way a waiter also tries again when the holder's ttl runs out. After
// maxLateGrants grants in a row whose replies came past their lease deadline
// (a ttl too short for the link) it gives up with NotObtained.
func (c *Core) Obtain(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	if err := c.check(name, ttl); err != nil {
		return nil, err
	}
	owner, err := NewOwner(c.cfg.Owners)
	if err != nil {
		return nil, err
	}
	lk := c.lockKeys(name)
	key := lk.lock
	if err := ctx.Err(); err != nil {
		return nil, c.notObtained(key, err)
	}
	h, _, err := c.attempt(ctx, lk, owner, ttl, Probe, "")
	if errors.Is(err, errLate) {
		err = nil // released already; wait like any other waiter
	}
	if h != nil || err != nil {
		if err != nil && ctx.Err() != nil {
			err = c.notObtained(key, ctx.Err(), err)
		}
		return h, err
	}
	// A queueing waiter listens on its Locker's grant channel, where a random
	// ticket names it in place of its secret owner id; any other, on the
	// lock's wake-up channel.
	channel, ticket := WakeChannel(key), ""
	if c.grants != "" {
		channel, ticket = c.grants, rand.Text()
	}
	w, err := c.notifier.Join(ctx, channel, ticket)
	entry := "" // the waiter's queue entry, when it queues
	woken, granted := false, false
	switch {
	case err == nil:
		defer func() {
			// A wake-up this waiter took but leaves without using goes to
			// the next waiter, or it would sleep out the holder's ttl.
			if woken && !granted && entry == "" {
				w.Unused()
			}
			w.Leave()
		}()
		if ticket != "" {
			entry = owner + " " + strconv.FormatInt(Millis(ttl), 10) + " " + c.kind() + " " + ticket + " " + channel
			// A waiter that gives up leaves the queue, and releases the lock
			// if it was handed over meanwhile, to the next waiter in line.
			defer func() {
				if !granted {
					c.abandon(ctx, lk, owner, ttl, entry)
				}
			}()
		}
	case ctx.Err() != nil:
		return nil, c.notObtained(key, ctx.Err())
	case errors.Is(err, notify.ErrClosed):
		return nil, c.notObtained(key, errLockerClosed)
	default:
		// Without wake-ups the holder's ttl still bounds the wait.
		c.logger().Warn("leasekit: cannot subscribe to lock releases; waiting on ttl alone",
			"key", key, "err", err)
	}
	var place int64      // the waiter's place in the queue
	var queued time.Time // when the attempt that queued it was sent
	late := 0            // grants in a row that came back past their deadline
	for {
		if late >= maxLateGrants {
			return nil, fmt.Errorf("%w: %s: %d grants in a row came back after their lease deadline (ttl %v): "+
				"the ttl is too short for the round trip to Redis: %w", c.cfg.Errors.NotObtained, Quote(key), late, ttl, errLate)
		}
		sent := time.Now()
		h, a, err := c.attempt(ctx, lk, owner, ttl, Wait, entry)
		switch {
		case errors.Is(err, errLate) && ctx.Err() == nil:
			late++
			continue // released already; try again
		case err != nil:
			if ctx.Err() != nil {
				return nil, c.notObtained(key, ctx.Err(), err)
			}
			return nil, err
		case h != nil:
			granted = true
			return h, nil
		case a.Place != 0:
			place, queued = a.Place, sent
		}
		late = 0
		woken, err = c.sleep(ctx, key, w, a.HolderTTL)
		if err != nil {
			return nil, err
		}
		if !woken || entry == "" {
			continue
		}
		if msg, ok := w.Grant(); ok {
			h, err := c.handed(ctx, lk, owner, ttl, msg, place, queued)
			switch {
			case h != nil:
				granted = true
				return h, nil
			case errors.Is(err, errLate):
				late++ // released already; the next attempt tries again
			case err != nil:
				return nil, err
			}
			// Stale: the next attempt settles it.
		}
	}
}

// sleep waits for a wake-up, the holder's ttl to run out, or ctx to end. It
// reports whether a wake-up ended it.
func (c *Core) sleep(ctx context.Context, key string, w *notify.Waiter, holderTTL time.Duration) (bool, error) {
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
		return false, c.notObtained(key, errLockerClosed)
	case <-ctx.Done():
		return false, c.notObtained(key, ctx.Err())
	}
}

// errLockerClosed is why an Obtain ends when its Locker is closed under it.
var errLockerClosed = errors.New("the locker is closed")

// notObtained is Obtain's error for the lock key when it ends for causes (the
// context's end, the Locker's close, a failure meanwhile): it matches
// NotObtained and each cause.
func (c *Core) notObtained(key string, causes ...error) error {
	return fmt.Errorf("%w: %s: %w", c.cfg.Errors.NotObtained, Quote(key), errors.Join(causes...))
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

// Package lease is the engine shared by leasekit's two kinds of lock: acquiring
// in one round trip, waiting in the lock's queue for a release to hand it over
// (or for a wake-up, where waiters cannot queue), lease deadlines on the
// monotonic clock, refresh, release, and holding a lease while a function runs.
//
// The public packages efficiency and correctness configure it with their own
// acquire and their own sentinel errors.
package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// Closed is for a new operation of a closed Locker, and a wait that its
	// Locker's Close ended.
	Closed error
	// Late is for a grant whose reply came after its lease deadline: it was
	// released, so nobody holds it.
	Late error
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
	// Left, when positive, is the key's remaining ttl as Redis reported it
	// for a grant it had made to the caller before this attempt (a client
	// retry), whose expiry the attempt did not restart; the lease is no
	// longer than that.
	Left time.Duration
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

// AcquireFunc runs one acquire round trip on the lock whose keys are k. It
// returns Redis's errors as they are, and the Core names the lock in them;
// an error of its own that names the lock already it returns through Named.
type AcquireFunc func(ctx context.Context, k *Keys, owner string, ttl time.Duration, mode Mode) (Attempt, error)

// Config configures a Core.
type Config struct {
	// Kind is "efficiency" or "correctness": the prefix of every error and
	// log message.
	Kind        string
	Client      redis.UniversalClient
	Prefix      string
	DriftFactor float64
	Owners      io.Reader // nil: crypto/rand
	Logger      *slog.Logger
	Errors      Errors
	Acquire     AcquireFunc
	// Fenced says the kind's grants carry a fencing token, drawn from the
	// lock's counter key, with the clock floor when ClockFloor is set; a
	// fenced grant stores "owner:token" in the lock key.
	Fenced     bool
	ClockFloor bool
	// ExpiringCounter says the counter key expires with the lease that
	// drew from it (fenced kinds with the clock floor only).
	ExpiringCounter bool
	// Replicated says a grant is used only once WAIT confirms it, which a
	// grant handed over by another holder's release cannot be: waiters do not
	// queue for a direct handoff.
	Replicated bool
}

// Core runs locks of one kind for one Locker.
type Core struct {
	cfg      Config
	notifier *notify.Notifier
	closed   atomic.Bool
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
	if cfg.Kind == "" {
		cfg.Kind = "leasekit"
	}
	c := &Core{cfg: cfg, notifier: notify.New(cfg.Client)}
	c.boxedKind, c.wake = c.kind(), wakeOn
	if _, single := cfg.Client.(*redis.Client); single && !cfg.Replicated {
		c.grants = GrantChannel(cfg.Prefix, rand.Text())
		c.wake = wakeOff
	}
	return c
}

// Close makes every new acquire fail with Errors.Closed, ends the waits under
// way with it, and stops the wake-up subscription. Held leases can still be
// refreshed and released.
func (c *Core) Close() error {
	c.closed.Store(true)
	return c.notifier.Close()
}

// Drift is the safety margin taken off a lease of length ttl: the clock drift
// between client and server (DriftFactor of ttl) plus 2 ms for Redis's expiry
// precision, but at most half the ttl, so that a lease of a few milliseconds
// is still usable for half its length.
func (c *Core) Drift(ttl time.Duration) time.Duration {
	return min(time.Duration(float64(ttl)*c.cfg.DriftFactor)+2*time.Millisecond, ttl/2)
}

// begin checks what every acquire must check before it touches Redis, and
// draws the caller's owner id.
func (c *Core) begin(ctx context.Context, name string, ttl time.Duration) (*Keys, string, error) {
	if c.closed.Load() {
		return nil, "", fmt.Errorf("%w: cannot acquire lock %s", c.cfg.Errors.Closed, Quote(name))
	}
	if err := CheckName(c.cfg.Errors.InvalidKey, name); err != nil {
		return nil, "", err
	}
	if err := CheckTTL(c.cfg.Errors.InvalidTTL, ttl); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", c.notObtained(name, err)
	}
	owner, err := NewOwner(c.cfg.Kind, c.cfg.Owners)
	if err != nil {
		return nil, "", err
	}
	return c.lockKeys(name), owner, nil
}

// attempt runs one acquire and, when granted, returns the lease. A waiter
// with a queue entry runs the wait script, which queues it when the lock is
// held. A grant whose reply came after its lease deadline is released, and is
// an error matching Errors.Late.
//
// After an error the caller decides whether to undo a grant the attempt may
// have made (see mayHaveGranted and abandon): a waiter that tries again
// recognises its own grant instead. place is the entry's place in the queue
// when an earlier attempt queued it, else 0.
func (c *Core) attempt(ctx context.Context, lk *Keys, owner string, ttl time.Duration, mode Mode, entry string, place int64) (*Held, Attempt, error) {
	sent := time.Now()
	var a Attempt
	var err error
	if entry != "" {
		a, err = c.wait(ctx, lk, owner, ttl, entry, place)
	} else {
		a, err = c.cfg.Acquire(ctx, lk, owner, ttl, mode)
	}
	if err != nil {
		return nil, a, c.acquireErr(lk, err)
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
	length := ttl
	if a.Left > 0 && a.Left < ttl {
		length = a.Left
	}
	deadline := start.Add(length - c.Drift(length))
	if late := time.Since(deadline); late >= 0 {
		c.abandon(ctx, lk, owner, ttl, "")
		return nil, fmt.Errorf("%w: lock %s: the grant's reply came %v after its lease deadline (ttl %v): "+
			"the ttl is too short for the round trip to Redis; released it", c.cfg.Errors.Late, Quote(lk.name), late.Round(time.Millisecond), ttl)
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

// wait runs one attempt of a queued waiter (scripts/wait.lua) whose entry an
// earlier attempt queued at place, if not 0: the script then keeps it there,
// or puts it back there if the queue lost it.
func (c *Core) wait(ctx context.Context, lk *Keys, owner string, ttl time.Duration, entry string, place int64) (Attempt, error) {
	at := notQueued
	if place != 0 {
		at = strconv.FormatInt(place, 10)
	}
	reply, err := c.Run(ctx, waitScript, lk, 3, owner, Millis(ttl), entry, c.boxedKind, at).Slice()
	if err != nil {
		return Attempt{}, err
	}
	if len(reply) == 2 && (reply[0] == int64(1) || reply[0] == int64(2)) {
		if value, ok := reply[1].(string); ok {
			return c.Grant(lk, owner, value)
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
	return Attempt{}, fmt.Errorf("unexpected reply %T of %d elements", reply, len(reply))
}

// notQueued is the wait script's ARGV[5] for a waiter that no attempt has
// queued yet, boxed once.
var notQueued any = ""

// Grant reads a grant to owner whose stored value is value: for a fenced kind,
// "owner:token" with a positive 64-bit token.
func (c *Core) Grant(lk *Keys, owner, value string) (Attempt, error) {
	if !c.cfg.Fenced {
		if value != owner {
			return Attempt{}, errors.New("the grant holds another owner's id")
		}
		return Attempt{Granted: true, Value: value}, nil
	}
	digits, ok := strings.CutPrefix(value, owner+":")
	if !ok {
		return Attempt{}, Named(fmt.Errorf("%w: lock %s: the grant carries no token", c.cfg.Errors.InvalidToken, Quote(lk.name)))
	}
	token, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || token == 0 {
		return Attempt{}, Named(fmt.Errorf("%w: lock %s: the grant holds token %q, not a positive 64-bit integer (key %s)",
			c.cfg.Errors.InvalidToken, Quote(lk.name), digits, Quote(lk.lock)))
	}
	return Attempt{Granted: true, Value: value, Token: token}, nil
}

// abandon releases the caller's grant, if Redis made one, after its reply was
// lost or came too late, and takes the caller's queue entry leaving (if not
// "") out of the lock's queue. Best effort: if Redis cannot be reached now
// either, the grant expires with its ttl.
func (c *Core) abandon(ctx context.Context, lk *Keys, owner string, ttl time.Duration, leaving string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(ttl, time.Second))
	defer cancel()
	value, prefix := owner, false
	if c.cfg.Fenced {
		// The token of a grant whose reply was lost is unknown.
		value, prefix = owner+":", true
	}
	if _, err := c.release(ctx, lk, value, prefix, leaving); err != nil && !IsServerReply(err) {
		c.logger().Warn(c.cfg.Kind+": could not release a grant it cannot use (its reply was lost or late, or its waiter gave up); it expires with its ttl",
			"lock", lk.name, "owner", Redact(owner), "ttl", ttl, "err", err)
	}
}

// mayHaveGranted reports whether an acquire that failed with err may still
// have been granted by Redis: its request may have been sent and its reply
// lost, or, resent by go-redis after a lost reply, been refused after the
// first send landed (OOM, LOADING). Not when the connection could not even be
// made, or the client is closed: then nothing was sent.
func mayHaveGranted(err error) bool {
	var op *net.OpError
	switch {
	case errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		return false
	}
	return true
}

// transient reports whether err is a failure that may pass while a waiter
// waits: the connection (a restart, a failover, a network fault), or a server
// that is loading, failing over or busy. Error replies that mean the request
// is wrong (WRONGTYPE, NOPERM, a corrupt key), a closed client and leasekit's
// own errors are not.
func transient(err error) bool {
	if errors.Is(err, redis.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"LOADING ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN ", "READONLY ", "BUSY "} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}

// IsServerReply reports whether err is an error reply from Redis (WRONGTYPE,
// NOPERM, OOM, an unknown command) rather than a failure to reach it: the
// command was refused, so it changed nothing.
func IsServerReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.ErrClosed)
}

// maxLateGrants is how many grants in a row may come back past their lease
// deadline before Obtain gives up: a ttl shorter than the round trip would
// otherwise have it grant and release in a loop until ctx ends.
const maxLateGrants = 3

// Try makes one attempt to acquire the lock called name.
func (c *Core) Try(ctx context.Context, name string, ttl time.Duration) (*Held, error) {
	lk, owner, err := c.begin(ctx, name, ttl)
	if err != nil {
		return nil, err
	}
	h, _, err := c.attempt(ctx, lk, owner, ttl, Try, "", 0)
	switch {
	case errors.Is(err, c.cfg.Errors.Late):
		return nil, err // released already
	case err != nil:
		return nil, c.failed(ctx, lk, owner, ttl, err)
	case h == nil:
		return nil, fmt.Errorf("%w: lock %s is held by another owner", c.cfg.Errors.NotObtained, Quote(name))
	}
	return h, nil
}

// failed ends an acquire whose attempt failed with err: it releases whatever
// Redis may have granted it, and returns err, which, when ctx has ended,
// also matches NotObtained and ctx.Err().
func (c *Core) failed(ctx context.Context, lk *Keys, owner string, ttl time.Duration, err error) error {
	if mayHaveGranted(err) {
		c.abandon(ctx, lk, owner, ttl, "")
	}
	name := lk.name
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return c.notObtained(name, ctx.Err(), err)
	}
	if ctx.Err() != nil && !errors.Is(err, c.cfg.Errors.NotObtained) {
		return c.notObtained(name, err)
	}
	return err
}

// notObtained is an acquire's error for the lock called name when it ends for
// causes (the context's end, a failure meanwhile): it matches NotObtained and
// each cause.
func (c *Core) notObtained(name string, causes ...error) error {
	return fmt.Errorf("%w: lock %s: %w", c.cfg.Errors.NotObtained, Quote(name), errors.Join(causes...))
}

func (c *Core) logger() *slog.Logger {
	if c.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.cfg.Logger
}

// Named marks an error that names its lock already, so that the Core passes it
// on unchanged.
func Named(err error) error { return named{err} }

type named struct{ error }

func (n named) Unwrap() error { return n.error }

// badFence starts the error reply of a script that found a fence counter it
// cannot draw a token from (scripts/grant.lua).
const badFence = "BADFENCE "

// acquireErr names the lock in err, an acquire's failure. A corrupt fence
// counter also matches InvalidToken.
func (c *Core) acquireErr(lk *Keys, err error) error {
	var n named
	if errors.As(err, &n) {
		return err
	}
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), badFence) {
		return fmt.Errorf("%w: lock %s: %s", c.cfg.Errors.InvalidToken, Quote(lk.name), strings.TrimPrefix(re.Error(), badFence))
	}
	return c.redisErr("acquire", lk, err)
}

// redisErr names the operation and the lock in err, a failure of Redis or of
// its reply. A command refused by an ACL inside a script comes back as a
// generic ERR; it is marked NOPERM here, as Redis marks the same refusal
// outside a script, so that it reads as the permission problem it is.
func (c *Core) redisErr(op string, lk *Keys, err error) error {
	return WrapRedis(c.cfg.Kind, op+" lock", lk.name, err)
}

// WrapRedis is err of the operation op on the thing called name, in the form
// "kind: op name: err".
func WrapRedis(kind, op, name string, err error) error {
	if strings.Contains(err.Error(), "user executing the script can't run this command") {
		return fmt.Errorf("%s: %s %s: NOPERM: the ACL user may not run a command this operation's script needs "+
			"(the README lists the ACL leasekit needs): %w", kind, op, Quote(name), err)
	}
	return fmt.Errorf("%s: %s %s: %w", kind, op, Quote(name), err)
}

// IsNilClient reports whether client is nil, or a nil pointer of one of
// go-redis's client types, which no Locker can use.
func IsNilClient(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Kind is the lock's kind as the scripts name it: "e", "f", "c" or "t" (see
// scripts/grant.lua).
func (c *Core) Kind() string { return c.kind() }

// ReachedRedis reports whether an acquire that failed with err got as far as
// Redis: an error reply, or a reply that did not parse.
func ReachedRedis(err error) bool {
	return !transient(err) && mayHaveGranted(err)
}

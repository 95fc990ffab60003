// Package leasetest lets you unit-test your own lock code on an in-process
// miniredis, as net/http/httptest does for HTTP code, and above all break it on
// purpose: expire a lease, hand the lock to another owner, move time.
//
// A test creates an Env, builds its Lockers on it, and drives the failure it
// wants to prove the code survives:
//
//	env := leasetest.New(t)
//	locker := env.Efficiency() // or env.Correctness(), or efficiency.New(env.Client)
//	...
//	env.Steal("nightly-report") // as if our holder paused past its ttl
//
// A semaphore's permits have their own controls: Permits, ExpirePermits and
// StealPermit. The operator's tools work on the Env as on a server: a
// Locker's Inspect agrees with Holder, and its Break ends a holder's Do at
// its next refresh.
//
// Lock names are the names your code passes to Obtain, Acquire, Do or Once,
// not Redis keys; give New the same WithPrefix as your Lockers if they use one
// (Env.Efficiency and Env.Correctness pass it on).
//
// A correctness Locker audits the deployment at its first acquire and logs
// every finding that is not OK. miniredis answers neither CONFIG nor INFO, so
// one built with correctness.New(env.Client) logs three "could not verify"
// warnings in every test; Env.Correctness builds it without the audit.
//
// Env moves Redis's time only. Lease deadlines, and the refreshes of Do and
// Once, run on the process's real clock: a test of Do's lost-lease handling
// uses Expire or Steal, which act at once, rather than Advance.
package leasetest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// Env is a miniredis server and a client for it, with controls that break
// leases on purpose.
type Env struct {
	// Server is the miniredis server, for whatever Env does not cover.
	Server *miniredis.Miniredis
	// Client is connected to Server: pass it to efficiency.New,
	// correctness.New or correctness.NewRegister.
	Client *redis.Client

	prefix  string
	mu      sync.Mutex
	now     time.Time
	lockers []io.Closer // built by Efficiency and Correctness
	thefts  int         // permits StealPermit took
}

// Option configures an Env.
type Option func(*Env)

// WithPrefix sets the key prefix of the Lockers under test. Default:
// "leasekit:", the Lockers' default.
func WithPrefix(prefix string) Option { return func(e *Env) { e.prefix = prefix } }

// New starts an Env that is closed when the test ends.
func New(tb testing.TB, opts ...Option) *Env {
	tb.Helper()
	e, err := Start(opts...)
	if err != nil {
		tb.Fatalf("leasetest: %v", err)
	}
	tb.Cleanup(e.Close)
	return e
}

// Start starts an Env outside a test (in an Example, say). Close it when done.
func Start(opts ...Option) (*Env, error) {
	m, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("starting miniredis: %w", err)
	}
	e := &Env{
		Server: m,
		Client: redis.NewClient(&redis.Options{Addr: m.Addr()}),
		prefix: lease.DefaultPrefix,
		now:    time.Now().UTC(),
	}
	for _, opt := range opts {
		if opt != nil {
			opt(e)
		}
	}
	// Redis's clock stands still until Advance moves it, so that key expiry
	// and the server time the clock floor reads stay in step.
	m.SetTime(e.now)
	return e, nil
}

// Close closes the Lockers built by Efficiency and Correctness and the
// client, and stops the server.
func (e *Env) Close() {
	e.mu.Lock()
	lockers := e.lockers
	e.lockers = nil
	e.mu.Unlock()
	for _, l := range lockers {
		_ = l.Close()
	}
	_ = e.Client.Close()
	e.Server.Close()
}

// Efficiency returns an efficiency Locker on Env.Client with the Env's
// prefix, closed when the Env is; opts are applied after the prefix.
func (e *Env) Efficiency(opts ...efficiency.Option) *efficiency.Locker {
	l := efficiency.New(e.Client, append([]efficiency.Option{efficiency.WithPrefix(e.prefix)}, opts...)...)
	e.keep(l)
	return l
}

// Correctness returns a correctness Locker on Env.Client with the Env's
// prefix and without the audit (see the package doc), closed when the Env
// is; opts are applied after those, so correctness.WithAudit(true) turns the
// audit back on.
func (e *Env) Correctness(opts ...correctness.Option) *correctness.Locker {
	defaults := []correctness.Option{correctness.WithPrefix(e.prefix), correctness.WithAudit(false)}
	l := correctness.New(e.Client, append(defaults, opts...)...)
	e.keep(l)
	return l
}

func (e *Env) keep(l io.Closer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lockers = append(e.lockers, l)
}

// Advance moves Redis's time forward by d for everything leasekit depends
// on at once: key ttls run down (leases expire) and the server clock that
// the fencing-token clock floor reads moves on, so expiry and tokens stay
// consistent. A negative d is ignored.
func (e *Env) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
	e.Server.FastForward(d)
	e.Server.SetTime(e.now)
}

// Now returns Redis's current time, as Advance has moved it.
func (e *Env) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// Expire makes the lease on the lock called name lapse now, as if its holder
// had paused past its ttl. The holder is not told: its next Refresh or
// Release returns ErrNotHeld, and Do cancels its function at its next
// refresh. Waiters queued for the lock find it at their next attempt (within
// their timer, at most a second), and the first of them still alive gets it,
// as after a holder died. It reports whether the lock was held.
func (e *Env) Expire(name string) bool {
	key := scripts.LockKey(e.prefix, name)
	v, _, held := e.lease(key)
	if !held {
		return false
	}
	if p, _ := scripts.ParseValue(v, false); !p.Queued {
		return e.Server.Del(key)
	}
	// The mark with the lease's expiry (scripts/wire.go), now: the key
	// outlives it, so that the queue is served first.
	ttl := e.Server.TTL(key)
	if err := e.Server.Set(key, scripts.Marked(scripts.Grant(v), e.Now().UnixMilli())); err != nil {
		return false
	}
	e.Server.SetTTL(key, max(ttl, time.Millisecond))
	return true
}

// lease reads the lock at key: its value, what is left of its lease, and
// whether it is held (a key whose lease lapsed with waiters queued is not).
func (e *Env) lease(key string) (value string, left time.Duration, held bool) {
	v, err := e.Server.Get(key)
	if err != nil {
		return "", 0, false
	}
	p, _ := scripts.ParseValue(v, false)
	left = e.Server.TTL(key)
	if p.Expiry >= 0 {
		left = time.Duration(p.Expiry-e.Now().UnixMilli()) * time.Millisecond
		if left <= 0 {
			return v, 0, false
		}
	}
	return v, max(left, 0), true
}

// thief is the owner id of the grants Steal makes.
const thief = "leasetest-thief"

// Steal hands the lock called name to another owner now, as if the holder's
// lease had expired and someone else had acquired it: for a correctness lock,
// a new grant with the next token (returned); for an efficiency lock, a new
// owner (and token 0). The new grant keeps the old holder's remaining ttl, or
// a minute if it had none.
func (e *Env) Steal(name string) (uint64, error) {
	key := scripts.LockKey(e.prefix, name)
	fence := scripts.CounterKey(scripts.LockKey(e.prefix, name))
	_, ttl, _ := e.lease(key)
	if ttl <= 0 {
		ttl = time.Minute
	}
	e.Server.Del(key)
	ctx := context.Background()
	if !e.Server.Exists(fence) {
		return 0, e.Client.Set(ctx, key, thief, ttl).Err()
	}
	// The counter alone, without the clock floor: counter + 1 is newer than
	// every token granted so far.
	reply, err := fencedAcquire.Run(ctx, port.GoRedis(e.Client), []any{key, scripts.QueueKey(key), fence}, thief, lease.Millis(ttl), "f")
	var got scripts.Attempt
	if err == nil {
		got, err = scripts.ReadAttempt(reply)
	}
	if err == nil && !got.Granted() {
		err = fmt.Errorf("the lock is held again")
	}
	var p scripts.Value
	if err == nil {
		p, err = scripts.ParseValue(got.Value, true)
	}
	if err != nil {
		return 0, fmt.Errorf("leasetest: steal lock %q: %w", name, err)
	}
	return p.Token, nil
}

var fencedAcquire = lease.NewScript(scripts.FencedAcquire)

// Holding is what Holder reports about a lock; nothing in it lets anyone
// release the lock.
type Holding struct {
	// Held says whether anyone holds the lock.
	Held bool
	// TTL is the lease's remaining ttl (0 when not held or without expiry).
	TTL time.Duration
	// Token is the current grant's fencing token (correctness locks only).
	Token uint64
}

// Holder reports whether the lock called name is held, for how long, and
// with which token.
func (e *Env) Holder(name string) Holding {
	v, left, held := e.lease(scripts.LockKey(e.prefix, name))
	if !held {
		return Holding{}
	}
	h := Holding{Held: true, TTL: left}
	if p, err := scripts.ParseValue(v, true); err == nil {
		h.Token = p.Token
	}
	return h
}

// Permits is what Permits reports about a semaphore; nothing in it lets
// anyone release a permit.
type Permits struct {
	// Limit is the limit the live permits were granted under; 0 when none
	// is live.
	Limit int
	// TTLs are the remaining ttls of the live permits, soonest first.
	TTLs []time.Duration
	// Queued is how many entries the semaphore's wait queue holds: its
	// waiters, and entries of waiters gone that the next release skips.
	Queued int
}

// Permits reports the live permits of the semaphore called name and its
// queue.
func (e *Env) Permits(name string) Permits {
	key := scripts.PermitsKey(e.prefix, name)
	var p Permits
	for _, left := range e.livePermits(key) {
		p.TTLs = append(p.TTLs, left.ttl)
	}
	if len(p.TTLs) > 0 {
		members, _ := e.Server.SortedSet(key)
		for member, score := range members {
			if score < 0 { // the header (scripts/wire.go)
				p.Limit, _ = scripts.HeaderLimit(member)
			}
		}
	}
	queue, _ := e.Server.ZMembers(scripts.QueueKey(key))
	p.Queued = len(queue)
	return p
}

// ExpirePermits makes every permit of the semaphore called name lapse now,
// as if each holder had paused past its ttl, and returns how many there
// were. The holders are not told: their next Refresh or Release returns
// ErrNotHeld, and Do cancels its function at its next refresh. Waiters find
// the permits free at their next attempt (within their timer, at most a
// second), as after a holder died.
func (e *Env) ExpirePermits(name string) int {
	key := scripts.PermitsKey(e.prefix, name)
	live := e.livePermits(key)
	for _, p := range live {
		e.Server.ZRem(key, p.owner)
	}
	return len(live)
}

// StealPermit hands the permit of the semaphore called name that expires
// first to another owner now, keeping its ttl, as if its holder had paused
// past its ttl and someone else had taken its place. It reports whether a
// permit was live. The holder is not told, as with ExpirePermits.
func (e *Env) StealPermit(name string) bool {
	key := scripts.PermitsKey(e.prefix, name)
	live := e.livePermits(key)
	if len(live) == 0 {
		return false
	}
	score, _ := e.Server.ZScore(key, live[0].owner)
	e.Server.ZRem(key, live[0].owner)
	e.mu.Lock()
	e.thefts++
	thief := thief + "-" + strconv.Itoa(e.thefts)
	e.mu.Unlock()
	e.Server.ZAdd(key, score, thief)
	return true
}

// permit is a live permit: its owner and remaining ttl.
type permit struct {
	owner string
	ttl   time.Duration
}

// livePermits are the permits at key whose expiry (server ms) is after Now,
// soonest first.
func (e *Env) livePermits(key string) []permit {
	members, err := e.Server.SortedSet(key)
	if err != nil {
		return nil
	}
	now := e.Now().UnixMilli()
	var live []permit
	for owner, expiry := range members {
		if ms := int64(expiry) - now; ms > 0 {
			live = append(live, permit{owner, time.Duration(ms) * time.Millisecond})
		}
	}
	slices.SortFunc(live, func(a, b permit) int { return cmp.Compare(a.ttl, b.ttl) })
	return live
}

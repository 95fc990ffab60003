package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// lockState is what -status reads of a lock. It never holds the lock's
// value: that is the holder's owner id, which would let anyone release the
// lock.
type lockState struct {
	key, fenceKey       string
	lockType, fenceType string        // as TYPE reports them: "none", "string", "list", ...
	ttl                 time.Duration // of the lease
	token               string        // the fence counter, when it is a string
	now                 time.Time     // the server's clock, if TIME may be read
	leader              bool          // an election's leader key is there
	// lapsed says the holder's lease ran out with waiters queued: the key
	// stays until the first live waiter takes it (scripts/wire.go).
	lapsed bool
}

// printStatus prints whether the lock is held, for how long, and the last
// fencing token granted for it. When a key holds something leasekit never
// writes, it says so and returns an error with status 65, so that a script
// checking locks notices a key that blocks them.
func printStatus(ctx context.Context, client *redis.Client, cfg config, out io.Writer) error {
	s, err := readState(ctx, client, scripts.LockKey(cfg.prefix, cfg.name), scripts.CounterKey(scripts.LockKey(cfg.prefix, cfg.name)))
	if err != nil {
		return unavailable(cfg.redis, err)
	}
	if s.lockType == "none" {
		// No lock of that name: it may be a semaphore's, which -status
		// without -n would report free.
		if limit, held, ok := semaphoreHeld(ctx, client, cfg); ok {
			if _, err := fmt.Fprintf(out, "%s is a semaphore, not a lock (%d permits held): its status, as -n %d -status gives it\n",
				cfg.name, held, limit); err != nil {
				return err
			}
			cfg.limit = limit
			return printSemaphoreStatus(ctx, client, cfg, out)
		}
	}
	held, ttl, token := s.describe()
	waiters := liveWaiters(ctx, client, cfg)
	if _, err := fmt.Fprintf(out, "lock: %s\nkind: %s\nkey: %s\nheld: %s\nttl: %s\nrefreshing: %s\nwaiters: %s\nlast token: %s\n",
		cfg.name, s.kind(), s.key, held, ttl, s.refreshing(cfg), waiters, token); err != nil {
		return err
	}
	if problems := s.problems(); len(problems) > 0 {
		return exitf(exitDataErr, "lock %q: %s", cfg.name, strings.Join(problems, "; "))
	}
	return nil
}

// refreshing says whether the holder still refreshes its lease, as a live
// lockrun does every ttl/3: the lease has run for ttl less what is left
// since its grant or last refresh. A holder that has missed a refresh by
// half the interval has stopped (killed, crashed, paused), and the name
// stays blocked until its lease runs out. It takes the runs' ttl, from
// -ttl: a guess would call a live holder with a shorter ttl stopped, and an
// operator might break it.
func (s lockState) refreshing(cfg config) string {
	switch {
	case s.lockType != "string" || s.lapsed:
		return "-"
	case !cfg.ttlSet:
		return "unknown: pass the runs' -ttl to tell a holder that stopped from a live one"
	case s.ttl < 0 || s.ttl > cfg.ttl+time.Second:
		return fmt.Sprintf("unknown: the lease is longer than -ttl %v; its runs use another -ttl (or -once)", cfg.ttl)
	}
	every, since := cfg.ttl/3, cfg.ttl-s.ttl
	if since > every+every/2 {
		return fmt.Sprintf("no: its last refresh was about %v ago, and a live lockrun refreshes every %v: "+
			"the holder has stopped (killed, crashed or paused); the name frees in %v, or at once with -break",
			since.Round(100*time.Millisecond), every.Round(time.Millisecond), s.ttl.Round(100*time.Millisecond))
	}
	return "yes"
}

// kind is what the name is, as its keys say: an election's lock (its leader
// key is there), a fenced lock (its fence counter is), or a plain lock.
func (s lockState) kind() string {
	switch {
	case s.leader:
		return "election (-fenced)"
	case s.token != "":
		return "fenced lock (-fenced)"
	}
	return "lock"
}

// readState reads both keys in one round trip.
func readState(ctx context.Context, client *redis.Client, key, fenceKey string) (lockState, error) {
	pipe := client.Pipeline()
	pttl := pipe.PTTL(ctx, key)
	value := pipe.Get(ctx, key)
	last := pipe.Get(ctx, fenceKey)
	// TYPE only names what a key holds when leasekit did not write it. It is
	// beyond the ACL the README gives leasekit: a user without it still gets
	// the status, with a foreign lock key read as held.
	lockType := pipe.Type(ctx, key)
	fenceType := pipe.Type(ctx, fenceKey)
	clock := pipe.Time(ctx)
	leader := pipe.Exists(ctx, scripts.LeaderKey(key))
	_, _ = pipe.Exec(ctx)
	if err := pttl.Err(); err != nil {
		return lockState{}, fmt.Errorf("reading %s: %w", lease.Quote(key), err)
	}
	s := lockState{key: key, fenceKey: fenceKey, ttl: pttl.Val(), lockType: typeName(lockType, "string"), fenceType: "string"}
	if s.ttl == -2 {
		s.lockType = "none"
	}
	if v, err := value.Result(); err == nil {
		// Only the mark of waiters is read: the owner id is not kept.
		p, _ := scripts.ParseValue(v, false)
		if s.ttl = p.LeaseLeft(s.ttl); s.ttl == 0 {
			s.lapsed = true
		}
	}
	s.leader = leader.Val() > 0
	if clock.Err() == nil {
		// Like TYPE, optional: a user who may only read keys still gets
		// the status, without the clock's check of the counter.
		s.now = clock.Val()
	}
	switch err := last.Err(); {
	case err == nil:
		s.token = last.Val()
	case errors.Is(err, redis.Nil):
		s.fenceType = "none"
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		s.fenceType = typeName(fenceType, "non-string value")
	default:
		return lockState{}, fmt.Errorf("reading %s: %w", lease.Quote(fenceKey), err)
	}
	return s, nil
}

// typeName is what TYPE answered, or assumed if it failed (NOPERM).
func typeName(cmd *redis.StatusCmd, assumed string) string {
	if cmd.Err() != nil {
		return assumed
	}
	return cmd.Val()
}

// describe returns the held, ttl and last token lines.
func (s lockState) describe() (held, ttl, token string) {
	switch {
	case s.lockType == "none":
		held = "no"
	case s.lockType == "string" && s.lapsed:
		held = "no (its lease lapsed; the first waiter still alive takes it at its next attempt)"
	case s.lockType == "string":
		held = "yes"
	default:
		held = "unknown: " + s.foreignLock("the key")
	}
	switch {
	case s.lockType == "none" || s.lapsed:
		ttl = "-"
	case s.ttl < 0:
		ttl = "none (the key has no expiry)"
	default:
		ttl = s.ttl.Round(time.Millisecond).String()
	}
	switch {
	case s.fenceType == "none":
		token = "none"
	case s.fenceType != "string":
		token = "unknown: " + s.foreignFence(s.fenceKey)
	case s.counterFault() != "":
		token = strconv.Quote(s.token) + " (" + s.counterFault() + ")"
	default:
		token = s.token
	}
	return held, ttl, token
}

// problems lists what is wrong with the keys, if anything.
func (s lockState) problems() []string {
	var p []string
	if s.lockType != "none" && s.lockType != "string" {
		p = append(p, s.foreignLock(lease.Quote(s.key)))
	}
	switch {
	case s.fenceType != "none" && s.fenceType != "string":
		p = append(p, s.foreignFence(lease.Quote(s.fenceKey)))
	case s.fenceType == "string" && s.counterFault() != "":
		p = append(p, fmt.Sprintf("%s holds %q, %s", lease.Quote(s.fenceKey), s.token, s.counterFault()))
	}
	return p
}

// foreignLock says what the lock's key, called key, holds instead of a lock.
func (s lockState) foreignLock(key string) string {
	return fmt.Sprintf("%s holds a %s, not a lock", key, s.lockType)
}

// foreignFence says what the fence counter, called key, holds instead.
func (s lockState) foreignFence(key string) string {
	return fmt.Sprintf("%s holds a %s, not a fencing counter", key, s.fenceType)
}

// counterFault says why the fence counter, a string, cannot give the next
// token, or returns "". INCR keeps it as the decimal form of a non-negative
// 64-bit integer, with no sign, space or leading zero, and the largest one
// has no successor; with the clock floor (lockrun's), one more than an hour
// ahead of the server clock in µs gives tokens every fence refuses (a clock
// that ran fast and was set back). The acquire refuses all three
// (ErrInvalidToken).
func (s lockState) counterFault() string {
	n, err := strconv.ParseInt(s.token, 10, 64)
	switch {
	case err != nil || n < 0 || strconv.FormatInt(n, 10) != s.token:
		return "not a fencing token: the counter is corrupt"
	case n == math.MaxInt64:
		return "the largest token there is: no larger one can be drawn"
	case !s.now.IsZero() && n > s.now.Add(time.Hour).UnixMicro():
		return "more than an hour ahead of the server clock: did the clock run fast and get set back? Repair or delete it"
	}
	return ""
}

// liveWaiters is how many live waiters queue for the lock (an efficiency
// Locker's Inspect: the count is the same for either kind), or why it
// cannot say: the inspect script is beyond a user who may only read keys.
func liveWaiters(ctx context.Context, client *redis.Client, cfg config) string {
	l := efficiency.New(client, efficiency.WithPrefix(cfg.prefix))
	defer l.Close()
	info, err := l.Inspect(ctx, cfg.name)
	switch {
	case err == nil:
		return strconv.Itoa(info.Waiters)
	case strings.Contains(err.Error(), "NOPERM"):
		return "unknown (this user may not run leasekit's scripts)"
	}
	return "unknown"
}

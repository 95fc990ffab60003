package history_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

const (
	historyClients = 32
	// historyLocks is how many locks the clients share, each guarding the
	// Register resource of the same name: client i takes lock i%historyLocks,
	// so eight clients queue for each. One lock for all 32 would serialise
	// the run through its holders: 1.7 s a seed under -race, not 0.4.
	historyLocks = 4
	historySeeds = 20
	// historyOps is how many Register operations a seed records over all its
	// locks (a few more, as clients finish the round they started).
	historyOps = 1000
	// historyTTL is the shortest ttl of the leases, short so that a long
	// pause outlives the lease and another client is granted the lock while
	// the first still means to write. A run takes historyRoundTrips loaded
	// round trips when that is longer (see historyTTLOf).
	historyTTL        = 20 * time.Millisecond
	historyRoundTrips = 4
	// longPausePercent of the holds pause past the ttl. Each leaves its
	// lock idle for a ttl, which is what bounds the test's speed.
	longPausePercent = 3
)

// historyTTLOf is the ttl of a run's leases on client: historyTTL, or
// historyRoundTrips round trips of the machine as loaded now, up to a
// second. A grant whose reply still comes after its lease deadline is an
// outcome the clients record (see historyClient.run), not a failure.
func historyTTLOf(t *testing.T, client redis.UniversalClient) time.Duration {
	t.Helper()
	rt := loadedRoundTrip(t, client, historyClients)
	ttl := ttlFor(rt, historyRoundTrips, historyTTL, time.Second)
	t.Logf("ttl %v (loaded round trip p99 %v)", ttl, rt)
	return ttl
}

// lockHistory is what the clients of one lock recorded: the writes and reads
// of the Register resource the lock guards, and the grants of the lock with
// their tokens. Timestamps are nanoseconds on the monotonic clock since the
// run started, taken right before each call and right after it returned.
type lockHistory struct {
	register []porcupine.Operation
	grants   []porcupine.Operation
	final    registerState
}

// TestFencedRegisterHistory runs 32 clients on 4 locks that take a short
// correctness lease (20 ms, or 4 round trips of a loaded machine), pause
// (sometimes past the ttl), write to a Register with their token, sometimes
// read it back, and release. Per seed and lock, it checks the recorded
// history:
//   - the Register operations are linearizable as a fenced register: no write
//     is accepted with a token lower than one accepted before it, no accepted
//     write is lost, every read sees the latest accepted write;
//   - the grants are linearizable as a fetch-and-increment counter: each
//     token is greater than every token granted before;
//   - every acknowledged write is the final value or was overwritten by a
//     newer token.
//
// It runs on a real redis-server only: on miniredis under -race a seed takes
// ten seconds, not half of one.
func TestFencedRegisterHistory(t *testing.T) {
	redistest.RequireBinary(t)
	checkHistories(t, historySeeds, func(t *testing.T) redis.UniversalClient { return redistest.Real(t).Client })
}

// TestFencedRegisterHistoryOnCluster checks the same histories on a
// three-master Redis Cluster, where the locks' waiters queue on sharded
// grant channels: the four locks land on different slots, and each lock's
// keys, queue and Register on its own.
func TestFencedRegisterHistoryOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	checkHistories(t, historySeeds/4, func(t *testing.T) redis.UniversalClient {
		client := c.Client(t)
		t.Cleanup(func() { flushMasters(t, client) })
		return client
	})
}

// flushMasters deletes every key of a cluster, so that the next seed starts
// with fresh registers and counters: SYNC, so that no server (Valkey's
// lazyfree-lazy-user-flush) is still freeing them when it does.
func flushMasters(t *testing.T, client *redis.ClusterClient) {
	err := client.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		return node.Do(ctx, "FLUSHALL", "SYNC").Err()
	})
	if err != nil {
		t.Errorf("FLUSHALL: %v", err)
	}
}

// checkHistories records and checks the histories of seeds runs, each on a
// client (and a fresh store) from open.
func checkHistories(t *testing.T, seeds int, open func(t *testing.T) redis.UniversalClient) {
	var rejected, accepted int
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			client := open(t)
			locks, late := recordHistory(t, client, historyTTLOf(t, client), seed)
			if t.Failed() {
				return
			}
			var grants, a, r, ops int
			for _, name := range slices.Sorted(maps.Keys(locks)) {
				h := locks[name]
				requireLinearizable(t, name+"-register", registerModel, h.register)
				requireLinearizable(t, name+"-tokens", tokenModel, h.grants)
				reportSome(t, name+": stale write accepted", staleAccepted(h.register))
				ha, hr := checkAcknowledged(t, name, h)
				grants, a, r, ops = grants+len(h.grants), a+ha, r+hr, ops+len(h.register)
			}
			accepted, rejected = accepted+a, rejected+r
			t.Logf("%d grants (%d of them late), %d writes accepted, %d rejected, %d reads", grants, late, a, r, ops-a-r)
		})
	}
	// Without rejected writes the fence was never put to the test: no pause
	// outlived a lease while another holder wrote.
	if !t.Failed() && rejected == 0 {
		t.Errorf("rejected writes over %d seeds: got 0, want some (%d accepted)", seeds, accepted)
	}
}

// checkAcknowledged checks every accepted write against the register's final
// state: it is the final value, or a newer token overwrote it. It returns how
// many writes were accepted and rejected.
func checkAcknowledged(t *testing.T, name string, h *lockHistory) (accepted, rejected int) {
	t.Helper()
	var lost []string
	for _, op := range h.register {
		in := op.Input.(registerInput)
		switch {
		case !in.write:
		case !op.Output.(registerOutput).accepted:
			rejected++
		default:
			accepted++
			final := in.value == h.final.value && in.token == h.final.token
			if !final && in.token >= h.final.token {
				lost = append(lost, fmt.Sprintf("write(%d, %q): got final register %q@%d, want it or a newer token",
					in.token, in.value, h.final.value, h.final.token))
			}
		}
	}
	reportSome(t, name+": acknowledged write lost", lost)
	if accepted == 0 {
		t.Errorf("%s: accepted writes: got 0, want some", name)
	}
	return accepted, rejected
}

// reportSome reports the first few of msgs, and how many there were: a
// broken fence fails hundreds of writes, and five show the pattern.
func reportSome(t *testing.T, what string, msgs []string) {
	t.Helper()
	for i, m := range msgs {
		if i == 5 {
			t.Errorf("%s: %d more", what, len(msgs)-i)
			return
		}
		t.Errorf("%s: %s", what, m)
	}
}

// recordHistory runs the clients, with leases of ttl, until they have
// recorded historyOps Register operations, then reads each register's final
// state. It returns the histories by lock name, and how many grants came too
// late to be used.
func recordHistory(t *testing.T, client redis.UniversalClient, ttl time.Duration, seed uint64) (map[string]*lockHistory, int) {
	t.Helper()
	ctx := t.Context()
	reg := correctness.NewRegister(client)
	client.AddHook(grantHook{})
	// One Locker for all clients, as if they were goroutines of one process:
	// a release wakes one of its waiters, not all of them.
	locker := correctness.New(client, correctness.WithAudit(false))
	t.Cleanup(func() { _ = locker.Close() })
	start := time.Now()
	now := func() int64 { return time.Since(start).Nanoseconds() }
	var ops atomic.Int64
	var handed sync.Map // handedGrant: grants by a release, handing the lock to a waiter
	results := make(chan clientResult, historyClients)
	for id := range historyClients {
		c := &historyClient{
			lane:   id / historyLocks,
			lock:   fmt.Sprintf("history-%d", id%historyLocks),
			ttl:    ttl,
			locker: locker,
			reg:    reg,
			rng:    rand.New(rand.NewPCG(seed, uint64(id))),
			now:    now,
			ops:    &ops,
			handed: &handed,
		}
		go func() { results <- c.run(ctx) }()
	}
	locks := make(map[string]*lockHistory)
	late := 0
	for range historyClients {
		r := <-results
		if r.err != nil {
			t.Error(r.err)
		}
		h := locks[r.lock]
		if h == nil {
			h = &lockHistory{}
			locks[r.lock] = h
		}
		h.register = append(h.register, r.register...)
		h.grants = append(h.grants, r.grants...)
		late += r.late
	}
	for name, h := range locks {
		call := now()
		value, token, err := reg.Read(ctx, name)
		ret := now()
		if err != nil {
			t.Fatalf("final Read(%q): %v", name, err)
		}
		h.final = registerState{token: token, value: string(value)}
		h.register = append(h.register, porcupine.Operation{ClientId: 0, Call: call, Return: ret,
			Input: registerInput{}, Output: registerOutput{token: token, value: string(value)}})
	}
	return locks, late
}

// historyClient is one of the clients of a history run. It records its own
// operations, so they need no lock.
type historyClient struct {
	lane   int    // the client's ClientId among the clients of its lock
	lock   string // the lock, and the Register resource it guards
	ttl    time.Duration
	locker *correctness.Locker
	reg    *correctness.Register
	rng    *rand.Rand
	now    func() int64
	ops    *atomic.Int64
	handed *sync.Map
}

type clientResult struct {
	lock     string
	register []porcupine.Operation
	grants   []porcupine.Operation
	late     int
	err      error
}

func (c *historyClient) run(ctx context.Context) clientResult {
	grants := &grantLog{lane: c.lane, now: c.now, handed: c.handed}
	ctx = context.WithValue(ctx, grantLogKey{}, grants)
	r := clientResult{lock: c.lock}
	for round := 0; c.ops.Load() < historyOps && r.err == nil; round++ {
		before, ownBefore := len(grants.ops), grants.own
		lease, err := c.locker.Acquire(ctx, c.lock, c.ttl)
		// Each grant is one operation of the token history: grantLog
		// recorded it with the interval of the round trip that granted it,
		// this client's acquire or, for a lock handed over, the releaser's
		// release. An Acquire ends with one grant, after any number whose
		// reply came after their lease deadline, as a loaded machine can
		// make it: Acquire released those rather than hand out a lease
		// already gone, and tried again, or after three in a row gave up
		// with ErrLateGrant, and the client tries again. Their tokens were
		// granted all the same and stay in the token history.
		got, own := len(grants.ops)-before, grants.own-ownBefore
		mine := err == nil && got > 0 && grants.ops[len(grants.ops)-1].Output == lease.Token()
		handed := err == nil && !mine && c.awaitHanded(handedGrant{lease.Key(), lease.Token()})
		switch {
		case errors.Is(err, correctness.ErrLateGrant):
			r.late += own
		case err != nil:
			r.err = fmt.Errorf("%s client %d: Acquire: %w", c.lock, c.lane, err)
		case mine:
			r.late += own - 1
			r.err = c.hold(ctx, lease, round, &r)
		case handed:
			r.late += own
			r.err = c.hold(ctx, lease, round, &r)
		default:
			r.err = fmt.Errorf("%s client %d: Acquire: got token %d, which Redis was not seen to grant it last (own grants: %d)",
				c.lock, c.lane, lease.Token(), got)
		}
	}
	r.grants = grants.ops
	return r
}

// handedGrant is a grant a release made: the lock's key and its token. A
// token alone does not name a grant: with the clock floor, locks on two
// cluster nodes can draw the same microsecond.
type handedGrant struct {
	lock  string
	token uint64
}

// awaitHanded reports whether a release handed the lock over as grant. The
// grantee can hear of the handoff before the releaser's hook has read the
// release's reply, so it waits for the hook: a bound for a hung test, not a
// timing assertion.
func (c *historyClient) awaitHanded(grant handedGrant) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, ok := c.handed.LoadAndDelete(grant); ok {
			return true
		}
	}
	return false
}

// hold is one round of a client that holds lease: pause, write, perhaps read,
// release.
func (c *historyClient) hold(ctx context.Context, lease *correctness.Lease, round int, r *clientResult) error {
	c.pause()
	op, err := c.write(ctx, lease.Token(), fmt.Sprintf("c%d-%d", c.lane, round))
	if err != nil {
		return err
	}
	r.register = append(r.register, op)
	recorded := int64(1)
	if c.rng.IntN(3) == 0 {
		op, err := c.read(ctx)
		if err != nil {
			return err
		}
		r.register = append(r.register, op)
		recorded++
	}
	c.ops.Add(recorded)
	// A lease that expired during the pause is not held any more: that is
	// the scenario, not a failure.
	if err := lease.Release(ctx); err != nil && !errors.Is(err, correctness.ErrNotHeld) {
		return fmt.Errorf("%s client %d: Release: %w", c.lock, c.lane, err)
	}
	return nil
}

// pause holds the lease for a moment, or now and then for longer than its
// ttl, like a holder stopped by a GC pause: the lock expires under it.
func (c *historyClient) pause() {
	if c.rng.IntN(100) < longPausePercent {
		time.Sleep(c.ttl + time.Duration(c.rng.Int64N(int64(c.ttl))))
		return
	}
	time.Sleep(time.Duration(c.rng.Int64N(int64(500 * time.Microsecond))))
}

func (c *historyClient) write(ctx context.Context, token uint64, value string) (porcupine.Operation, error) {
	call := c.now()
	err := c.reg.Write(ctx, c.lock, token, []byte(value))
	ret := c.now()
	if err != nil && !errors.Is(err, correctness.ErrStaleToken) {
		return porcupine.Operation{}, fmt.Errorf("%s client %d: Write(%d): %w", c.lock, c.lane, token, err)
	}
	return porcupine.Operation{ClientId: c.lane, Call: call, Return: ret,
		Input:  registerInput{write: true, token: token, value: value},
		Output: registerOutput{accepted: err == nil}}, nil
}

func (c *historyClient) read(ctx context.Context) (porcupine.Operation, error) {
	call := c.now()
	value, token, err := c.reg.Read(ctx, c.lock)
	ret := c.now()
	if err != nil {
		return porcupine.Operation{}, fmt.Errorf("%s client %d: Read: %w", c.lock, c.lane, err)
	}
	return porcupine.Operation{ClientId: c.lane, Call: call, Return: ret,
		Input: registerInput{}, Output: registerOutput{token: token, value: string(value)}}, nil
}

// grantLogKey carries a client's *grantLog in the context of its Acquire
// calls, for grantHook.
type grantLogKey struct{}

// grantLog is the token history of one client: an operation for each fenced
// acquire round trip that granted the lock, timed from right before the
// command was sent to right after its reply (go-redis retries included). It
// is appended to only in the client's own goroutine, where go-redis runs the
// hook.
//
// The interval of the round trip, not of the whole Acquire call, is what
// makes the check feasible and sharp: an Acquire's interval includes its
// wait, so with clients queued for a lock nearly every grant overlaps every
// other, porcupine's search grows exponentially (one seed ran out of ten
// minutes and 6 GB), and almost any order of tokens would pass. The grant
// happens inside the round trip, so the check stays sound.
type grantLog struct {
	lane   int
	now    func() int64
	ops    []porcupine.Operation
	handed *sync.Map // the handedGrants made by a release, for the grantee to find
	own    int       // how many of ops granted the lock to this client
}

// grantHook is a go-redis hook that records the round trips that granted a
// token (a fenced acquire, a waiter's try, a release that handed the lock on)
// in the grantLog of the calling client.
type grantHook struct{}

func (grantHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (grantHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (grantHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		log, ok := ctx.Value(grantLogKey{}).(*grantLog)
		script := scriptOf(cmd)
		if !ok || script == nil {
			return next(ctx, cmd)
		}
		call := log.now()
		err := next(ctx, cmd)
		ret := log.now()
		if err != nil {
			return err
		}
		// What the reply says was granted, read as the engine reads it: a
		// grant's token (a fenced acquire's, a waiter's, or the token a
		// release handed on), and the token of a grant a waiter's try or a
		// lapsed lease's release handed to the first live waiter, another
		// client. An efficiency grant ("-") has none.
		var token, handed string
		reply := cmd.(*redis.Cmd).Val()
		if script == scripts.Release {
			if e, err := scripts.ReadEnd(reply); err == nil && e.Handed && e.Token != "-" {
				if e.Lease == scripts.LeaseHeld {
					token = e.Token
				} else {
					handed = e.Token
				}
			}
		} else if at, err := scripts.ReadAttempt(reply); err == nil {
			if v, err := scripts.ParseValue(at.Value, true); at.Code == scripts.AttemptGranted && err == nil {
				token = strconv.FormatUint(v.Token, 10)
			}
			handed = at.Handed
		}
		if n, err := strconv.ParseUint(handed, 10, 64); err == nil {
			lock, _ := cmd.Args()[3].(string)
			log.ops = append(log.ops, porcupine.Operation{ClientId: log.lane, Call: call, Return: ret, Output: n})
			log.handed.Store(handedGrant{lock, n}, struct{}{})
		}
		if token == "" {
			return nil
		}
		n, perr := strconv.ParseUint(token, 10, 64)
		if perr != nil {
			return fmt.Errorf("grant token %q: %w", token, perr)
		}
		log.ops = append(log.ops, porcupine.Operation{ClientId: log.lane, Call: call, Return: ret, Output: n})
		if script == scripts.Release {
			lock, _ := cmd.Args()[3].(string) // the script's KEYS[1]
			log.handed.Store(handedGrant{lock, n}, struct{}{})
		} else {
			log.own++
		}
		return nil
	}
}

// scriptOf returns the script that can grant a token which cmd runs, or nil.
func scriptOf(cmd redis.Cmder) *scripts.Script {
	args := cmd.Args()
	if len(args) < 2 {
		return nil
	}
	body, _ := args[1].(string)
	for _, s := range []*scripts.Script{scripts.FencedAcquire, scripts.Wait, scripts.Release} {
		switch cmd.Name() {
		case "evalsha":
			if body == s.Hash() {
				return s
			}
		case "eval": // after NOSCRIPT: the script's source
			if redis.NewScript(body).Hash() == s.Hash() {
				return s
			}
		}
	}
	return nil
}

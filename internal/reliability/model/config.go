package model

import (
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"runtime"
	"slices"
	"time"
)

// Kind is what the participants contend for.
type Kind int

const (
	// Efficiency is an efficiency lock: a probe is SET NX PX.
	Efficiency Kind = iota
	// Correctness is a correctness lock with the clock floor: a probe is
	// fenced_acquire.lua, and every grant carries a token.
	Correctness
	// Semaphore is a semaphore of Config.Limit permits.
	Semaphore
	// Election is an election: candidates take its correctness lock, take
	// office (election_announce.lua) and resign (election_resign.lua), and
	// read its leader (election_leader.lua).
	Election
)

var kindNames = [...]string{"efficiency lock", "correctness lock", "semaphore", "election"}

func (k Kind) String() string { return kindNames[k] }

// Faults are how many faults of each kind one path may hold.
type Faults struct {
	// Die kills a participant: it never acts again, and its subscription
	// goes away (PUBSUB NUMSUB stops counting it).
	Die int
	// Pause stops a participant while time passes, until it resumes.
	Pause int
	// Lose, Dup and Forge lose a grant message in flight, deliver one
	// twice, or publish one nobody granted to a waiter's channel. (Delay
	// needs no budget: a message in flight is read whenever its waiter
	// reads. Messages to one participant arrive in the order they were
	// published, as on its one subscription connection.)
	Lose, Dup, Forge int
	// Restart makes the server lose every key (no persistence).
	Restart int
	// GiveUp ends a waiter's wait (its context ended), as waiter.leave
	// does.
	GiveUp int
	// Step steps the server's clock by one of Config.Steps: TIME in a
	// script, and the keys' expiries with it (Redis stores an expiry as a
	// time on its clock), but not the participants' own clocks, on which
	// they time their leases, sleeps and deadlines.
	Step int
	// Resend loses the reply to one of a participant's state-changing
	// commands (any of them: an acquire's, a wait's, a release's and its
	// serving on, a refresh's, a give-up's, an election's announce and
	// resign, a stamp's under Config.Source, a plain SET IFEQ's or
	// DELEX's under Config.Plain): the command ran, and the participant
	// sends the same command again later, as go-redis does, and reads only
	// that reply.
	Resend int
	// Break is how many times the operator breaks the lock (Core.Break,
	// on an election with its leader key): not a semaphore, which has no
	// Break.
	Break int
}

// Config is one check: who contends for what, under which faults, how far.
type Config struct {
	// Kind is what the participants contend for.
	Kind Kind
	// Clients is how many participants contend: 1 to 4.
	Clients int
	// Limit is a semaphore's limit.
	Limit int
	// Scripts are the scripts run; the zero value runs Leasekit().
	Scripts Scripts
	// Faults are the faults one path may hold.
	Faults Faults
	// Cycles bounds the acquires each participant begins; 0: no bound.
	Cycles int
	// ArriveAtStart makes participants begin acquires only before the
	// clock first moves: no newcomer arrives later.
	ArriveAtStart bool
	// ForgeAlone forges a grant message only for a waiter with no other
	// message in flight to it; without it, a forged message may also come
	// before or after a real one the waiter has not read yet, which
	// TestForgedGrantMessage checks apart.
	ForgeAlone bool
	// Tries lets a participant begin a lone try (TryObtain, TryAcquire)
	// as well as an acquire that waits.
	Tries bool
	// Steps are the amounts a step of the server's clock (Faults.Step)
	// moves it by, ms, back when negative; empty: defaultSteps.
	Steps []int64
	// Patience gives each acquire that waits a deadline, ms after its
	// probe, by its own clock: it gives up then (its entries carry patience
	// 0, as the Go client's do, and no script judges it). 0: none.
	Patience int64
	// Scan bounds the queue entries one script call looks at (queue.lua's
	// scanning); 0 keeps the scripts' bound, a hundred, which no queue of
	// the checker's reaches. A small one makes calls stop short at dead
	// entries, as a killed process's hundred waiters would.
	Scan int
	// From is where Explore and Walk begin: the state this schedule
	// (ParseSchedule) reaches from the start, so that a check looks past a
	// history it names; its moves come first in a trace, and count toward
	// neither Depth nor a walk's depth. Empty: the start.
	From Schedule
	// Depth bounds the moves of a path Explore explores.
	Depth int
	// EachInvariant makes Explore go on past the first violation, to
	// Depth, and report the first it finds of each invariant: a test that
	// fails lists every invariant a change must mend, each with one of its
	// shortest counterexamples.
	EachInvariant bool
	// Workers is how many goroutines explore, each with a miniredis of its
	// own; 0: GOMAXPROCS.
	Workers int
	// Source makes a correctness lock's or an election's grants draw their
	// tokens from a token source outside Redis (correctness.WithTokens,
	// internal/lease's tokens.go): after each grant its holder draws its
	// token from a counter the model keeps beside the server (a restart
	// does not lose it, nor does a step of the clock move it), and then
	// stamps it into its grant (refresh.lua with ARGV[4]), each a move of
	// its own; it holds only once the stamp's reply says held. Not with
	// Patience.
	Source bool
	// Plain makes an efficiency lock's holders refresh and release on the
	// plain path, as internal/lease's plain.go does where the server has
	// the commands: a refresh sends SET key owner IFEQ owner PX ttl first,
	// a release DELEX key IFEQ owner, and only when that misses (the value
	// is not the bare grant: waiters' mark, gone, another owner's) the
	// script, in the holder's next move (two round trips). A release whose
	// DELEX was sent again after its reply was lost, first sent before the
	// lease's local deadline, reports a script reply of gone or another
	// owner's as released. Every lease that no grant
	// message handed takes it (the Core's skipping it for a lock seen
	// contended leaves the scripts alone, which the checks without Plain
	// explore). SET IFEQ runs as its equivalent script (miniredis has no
	// SET IFEQ), and so does DELEX on a real server without it (plain.go).
	// Only for Efficiency.
	Plain bool

	// nativeLua runs scripts in miniredis's own EVAL (a test compares).
	nativeLua bool
	// forgetful and deaf plant bugs in the mirror of the Go client: its
	// Locker remembers nothing a waiter took, or hears grant messages for
	// waiters that left and does nothing.
	forgetful, deaf bool
	// drawEarly and unchecked plant bugs in the mirror of the Go client
	// under Source: it draws its token as its acquire begins (at its probe
	// or lone try, again at each send of it), before any grant, and stamps
	// that token into whatever grant the acquire gets; or it takes any
	// reply of its stamp for held.
	drawEarly, unchecked bool
}

// Result is what a check explored, and the first violation it found.
type Result struct {
	// States is how many distinct states were reached, Steps how many
	// moves were taken, and Runs how many server operations ran (the
	// others came from the memo).
	States, Steps, Runs int
	// Depth is the longest path explored.
	Depth int
	// Violation is the first broken invariant found, and Trace the path
	// to it, replayed.
	Violation *Violation
	Trace     *Trace
	// Counterexamples are the violations Explore found, each with its
	// trace: the first, or with Config.EachInvariant the first of each
	// invariant, in the order found (the shortest first).
	Counterexamples []Counterexample
	// Paths counts the steps that took each of the protocol's rarer paths
	// (PathStopShort and the others), so that a test can tell that a check
	// reaches them.
	Paths map[string]int
	// Elapsed is how long the check took.
	Elapsed time.Duration
	path    Schedule
}

// Counterexample is a violation and the path to it, replayed: one of the
// shortest to a violation of its invariant.
type Counterexample struct {
	Violation *Violation
	Trace     *Trace
	path      Schedule
}

// Schedule returns the path to the violation, to replay it.
func (ce Counterexample) Schedule() Schedule { return ce.path }

// The protocol's rarer paths, as Result.Paths counts them.
const (
	// PathStopShort: a call stopped short at dead queue entries (a wait's
	// or an acquire's code 4, a release's 3 or -2), the lock left vacant.
	PathStopShort = "a call stopped short"
	// PathServeOn: a releaser's next call served the queue on.
	PathServeOn = "a releaser served on"
	// PathSettle: a lone try's call settled the resource.
	PathSettle = "a lone try settled"
	// PathServedHead: a waiter's attempt or a lone try handed the lock to
	// the first live waiter (its lease had lapsed).
	PathServedHead = "a wait served the head"
	// PathPassedOn: a Locker released a grant handed to a waiter of its
	// that had left.
	PathPassedOn = "a Locker passed a grant on"
	// PathUnqueued: a release that found lost a lease a grant message
	// handed over took the entry the message named out of the queue.
	PathUnqueued = "a lost handed lease's entry went"
	// PathLateStamp: a stamp found its lease gone (Config.Source), and the
	// acquire went on as after a late grant.
	PathLateStamp = "a stamp found its lease gone"
	// PathRestamped: a stamp sent again after its reply was lost found the
	// grant its first send stored, and held it.
	PathRestamped = "a stamp sent again found its own"
	// PathNoToken: a draw came at or after its grant's lease deadline: the
	// source's call timed out, and the grant was released.
	PathNoToken = "a draw came too late"
	// PathFloorless: a stamp held a grant whose Redis token was not above
	// the Redis token of the grant stamped before it: the Redis counter
	// would have broken Tokens there, the source's token did not.
	PathFloorless = "a stamp outran the clock floor"
	// PathPlainMissed: a plain command (Config.Plain) missed, and the
	// holder's next move ran the script.
	PathPlainMissed = "a plain command missed"
	// PathResentDelete: a release whose DELEX was sent again reported
	// released on a script reply of gone or another owner's.
	PathResentDelete = "a resent DELEX's release said released"
)

func (r Result) String() string {
	s := fmt.Sprintf("%d states, %d steps (%d server runs), depth %d, %v", r.States, r.Steps, r.Runs, r.Depth, r.Elapsed.Round(time.Millisecond))
	for _, p := range slices.Sorted(maps.Keys(r.Paths)) {
		s += fmt.Sprintf("; %s %d times", p, r.Paths[p])
	}
	if r.Violation != nil {
		s += "; violation: " + r.Violation.Error()
	}
	for _, ce := range r.Counterexamples[min(1, len(r.Counterexamples)):] {
		s += "; violation: " + ce.Violation.Error()
	}
	return s
}

// base is the clock a check starts at, ms since 1970.
const base = 1_700_000_000_000

// defaultSteps are the steps of the server's clock a check takes when
// Config.Steps is empty: half a minute forward and back, past every ttl,
// the ten seconds a marked key lingers, and a waiter's patience.
var defaultSteps = []int64{30_000, -30_000}

// checker runs one Config.
type checker struct {
	cfg   Config
	p     protocol
	seeds [2]maphash.Seed
	steps []int64 // Config.Steps, or defaultSteps
	start *world  // the world after Config.From (prepare); nil: initial
}

func newChecker(cfg Config) (*checker, error) {
	switch {
	case cfg.Clients < 1 || cfg.Clients > 4:
		return nil, errors.New("model: Clients must be 1 to 4")
	case cfg.Kind == Semaphore && cfg.Limit < 1:
		return nil, errors.New("model: a semaphore needs a Limit")
	case cfg.Kind == Semaphore && cfg.Faults.Break > 0:
		return nil, errors.New("model: a semaphore has no Break")
	case slices.Contains(cfg.Steps, 0) || cfg.Patience < 0:
		return nil, errors.New("model: a step of the clock must move it, and Patience may not be negative")
	case cfg.Source && cfg.Kind != Correctness && cfg.Kind != Election:
		return nil, errors.New("model: a token source is for correctness locks and elections")
	case cfg.Source && cfg.Patience > 0:
		return nil, errors.New("model: a token source with Patience is not modelled")
	case (cfg.drawEarly || cfg.unchecked) && !cfg.Source:
		return nil, errors.New("model: a stamp's bug needs Source")
	case cfg.Plain && cfg.Kind != Efficiency:
		return nil, errors.New("model: the plain path is an efficiency lock's")
	}
	if cfg.Scripts == (Scripts{}) {
		cfg.Scripts = Leasekit()
	}
	if cfg.Scan > 0 {
		var err error
		if cfg.Scripts, err = cfg.Scripts.scanning(cfg.Scan); err != nil {
			return nil, err
		}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	steps := cfg.Steps
	if len(steps) == 0 {
		steps = defaultSteps
	}
	return &checker{cfg: cfg, p: protocol{kind: cfg.Kind, limit: cfg.Limit, src: cfg.Scripts},
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, steps: steps}, nil
}

// prepare plays Config.From on x, to begin exploring where it leads; it
// fails if a move of it breaks an invariant.
func (c *checker) prepare(x *executor) error {
	w := c.initial()
	for k, m := range c.cfg.From.moves {
		n, o := c.apply(x, w, m)
		if v := c.judge(w, m, n, &o, true); v != nil {
			return fmt.Errorf("model: move %d of Config.From, %v, breaks an invariant: %w", k+1, m, v)
		}
		w = n
	}
	c.start = w
	return nil
}

// origin is the world a check begins from: after Config.From.
func (c *checker) origin() *world {
	if c.start != nil {
		return c.start
	}
	return c.initial()
}

// initial is the world before any move.
func (c *checker) initial() *world {
	w := &world{rs: redisState{clock: base}, clients: make([]client, c.cfg.Clients),
		left: c.cfg.Faults, freeSince: -1, lonely: -1}
	w.rs.micros = c.p.now(w)
	return w
}

// executors start a miniredis for each worker, sharing one memo.
func (c *checker) executors(n int, m *memo) ([]*executor, error) {
	xs := make([]*executor, n)
	for i := range xs {
		s, err := newMini(c.p.keys(), c.p.marks(), base, c.cfg.nativeLua)
		if err != nil {
			closeAll(xs)
			return nil, err
		}
		xs[i] = &executor{b: s, mini: s, memo: m}
	}
	return xs, nil
}

// closeAll closes the executors' servers.
func closeAll(xs []*executor) {
	for _, x := range xs {
		if x != nil {
			x.b.close()
		}
	}
}

// memoLimit bounds the results the memo keeps (a few hundred bytes each).
const memoLimit = 1 << 18

// Package model is a model checker for leasekit's protocol: it runs the
// real Lua scripts (package scripts' sources, or a copy a test changed) on
// miniredis with a controlled clock, drives an abstract client for each of
// 2 to 4 participants, explores every interleaving of their moves and of
// the environment's faults up to a bound, and checks invariants after every
// step. docs/reliability.md says where it stands among the fault tests.
//
// # The model
//
// A participant is the Go client of internal/lease reduced to its protocol
// (protocol.go mirrors the commands, replies and wire formats): it probes
// (SET NX PX for an efficiency lock, fenced_acquire.lua for a correctness
// one, sem_acquire.lua for a semaphore), subscribes to its Locker's grant
// channel, attempts with wait.lua (queueing its entry, with the generations
// of scripts/wire.go; again at once when the call stopped short at dead
// entries), sleeps until a grant message or its timer (the holder's ttl,
// at most a second), releases (and, when the call stopped short, goes on
// serving the queue with further calls, as Core.releaseWith does), refreshes,
// gives up (release.lua taking its entries out of the queue, as
// waiter.leave does), pauses and resumes, or dies (its subscription goes,
// and PUBSUB NUMSUB stops counting it). With Config.Tries it also makes
// lone tries (TryObtain, TryAcquire), which settle a lease that lapsed with
// waiters queued through the wait script. Its Locker remembers what a
// waiter took from a grant message, and releases a later grant for that
// waiter other than the one it holds (strays.took); a release that finds
// such a lease lost takes the waiter's entry out of the queue, which a
// forged message would have left there (Held.handed). A candidate in an
// election also takes office (election_announce.lua), keeps its leader key
// alive with its refreshes, resigns after its release
// (election_resign.lua), and anyone reads the leader (election_leader.lua).
// With Config.Patience an acquire that waits has a deadline: its entries
// carry it, and it leaves at it by its own clock. An operator breaks the
// lock (Faults.Break) as Core.Break does, its every client-side step in one
// function (protocol.breakLock), and serves the queue on as a release does.
//
// With Config.Source a correctness lock's or an election's grants take
// their tokens from a token source outside Redis, as with
// correctness.WithTokens (internal/lease's tokens.go, stamp.go): the
// scripts grant as before, then the holder draws its token from a counter
// the checker keeps beside the server (linearizable and strictly
// increasing: a restart does not lose it, a step of the server's clock
// does not move it), and stamps it into its grant (refresh.lua with
// ARGV[4]), each a move of its own. It holds only once its stamp's reply
// says held; a stamp that finds the lease gone fails the grant as a late
// one (a lone try ends, any other acquire waits on), and a draw at or past
// the grant's lease deadline is the source timing out: the grant is
// released, and the acquire ends.
//
// With Config.Plain an efficiency lock's holder takes the plain path of
// internal/lease's plain.go for a lease that no grant message handed it:
// its refresh sends SET key owner IFEQ owner PX ttl, its release DELEX key
// IFEQ owner, and only when that misses (the value is not the bare grant)
// the script, in a move of its own that follows at once (plain.go), while
// others move in between. A release whose DELEX was sent again after its
// reply was lost reports a script reply of gone or another owner's as
// released (Held.end). Every such lease takes the plain path: the Core's
// skipping it for a lock seen contended leaves the scripts alone, which
// the checks without Plain explore. miniredis has no SET IFEQ: it runs as
// its exact equivalent in a script, and a real server without DELEX runs
// that as one too.
//
// A reply may be lost (Faults.Resend), as go-redis meets it: the command of
// any state-changing step ran (a probe, a lone try or its settling, an
// attempt, a release or its serving on, a refresh, a give-up, an announce,
// a resign, a Locker's release, a Break, a stamp, a plain command), its reply
// never came, and the sender sends the same command again up to a read timeout
// later, while others move and time passes, and acts on the second reply only.
// The move is cut at that command and resumed by the resend from the sender's
// state before it (resend.go). Its lease is measured from the first send, so a
// grant that comes too late is released, as acquire.lease does.
//
// The lock's value records the lease's expiry with the mark of waiters, and
// a marked key outlives its lease by ten seconds: a lease lapses at the
// mark's expiry, which the checker reads (holders), and the clock stops
// there as at any deadline. The environment advances the clock to the next
// deadline (a key's or a permit's expiry, a lease's lapse, a waiter's
// timer or deadline, a holder's keeper due to refresh, a read timeout),
// loses or duplicates a grant message, forges one, restarts the server
// without persistence, or steps the server's clock (Faults.Step) forward or
// back by one of Config.Steps. A step moves TIME in a script and every
// key's expiry with it (Redis keeps an expiry as a time on its clock: a key
// due before the new reading expires, a step back lengthens every ttl),
// but not the participants' clocks, on which they time their leases,
// sleeps and deadlines (their monotonic clocks: world.local).
// Messages are delivered as late as any interleaving makes them, but to
// each participant in the order they were published (its one subscription
// connection), and its Locker keeps every one for a waiter, oldest first:
// the waiter reads the oldest, and, short of a grant it can use, attempts
// before it reads the next; once it took a grant, the messages left for
// it go to the strays, none dropped for a later one (notify.Waiter). A
// participant that is not paused acts when it must (about to attempt or
// settle, its timer fired or its deadline passed, serving a queue on, its
// Locker with a message for a waiter that left, a read timeout after a lost
// reply) before time passes. Faults are budgeted per path
// (Faults). Config.Scan makes every script call look at fewer queue
// entries than a hundred, so that a dead waiter's entry stops it, as a
// killed process's hundred entries stop a real one.
//
// Publishing is taken out of miniredis's hands and into the checker's (a
// message in flight is part of the state); subscriptions are miniredis's
// own, so that the scripts' PUBSUB NUMSUB counts them. miniredis's clock
// moves only when the checker moves it, and TIME in a script follows it.
//
// # Exploration
//
// A state is the server (every key's type, content and ttl, the clock, the
// subscribed channels), each participant's abstract state (with what its
// Locker remembers), the messages in flight, the faults left and what the
// invariants track. Explore goes breadth first, so a violation comes with
// one of the shortest paths to it, and deduplicates states up to a
// permutation of the participants' names. It rebuilds a state in miniredis
// to expand it (cheaper than replaying its path, which costs a script run a
// step) and remembers what each operation did to each server state. Walk
// goes further on seeded random walks. Result reports the distinct states
// reached, and how many steps took each of the protocol's rarer paths
// (Result.Paths), so that a test can tell it reached them. With
// Config.EachInvariant it goes on past a violation and reports the first
// of each invariant (Result.Counterexamples); with Config.From it begins
// where a named schedule leads. Replay runs a schedule on a real
// redis-server beside miniredis (not a step of its clock), and compares
// them step by step.
//
// # Invariants
//
// OneGrant: a lock holds at most one live grant (a lease that has not
// lapsed), and passes from one owner to another only by the first's
// release; a semaphore holds at most its limit of live permits.
//
// Looks: every grant a participant believes it holds is the one the key
// holds, or the participant learns otherwise at its next look: a refresh
// or release says "held" exactly when the server held that grant (a
// release sent again, and a look whose reply came before a lost one: when
// the move first sent), a grant a participant's own command reports is on
// the server, and so is a grant a reply says its call handed on to the
// first live waiter. The operator's Break says it broke a live lease
// exactly when one held the lock as it was first sent.
//
// NoFalseLoss: a release whose first send released the sender's live
// lease, its reply lost and the command sent again, reports that it
// released it, never "not held" (which Do and Hold turn into a loss of a
// lease fn had all along); so does a Break that broke a live lease, and a
// release whose plain DELEX's first send deleted the grant (Config.Plain).
//
// ResentDelete: a release whose plain DELEX was sent again, and whose
// script then found the lease gone or another owner's, says released only
// of a lease the server held when the DELEX was first sent; the one look
// that Looks leaves to it (any other reply of that release's script is
// judged as any release's).
//
// Breaks: a Break, first sent or sent again, ends only the grant that was
// live when the operator first sent it; a grant made after (the one its
// first send handed to the first waiter, say) is not its to end, or two
// holders run at once.
//
// FIFO: a grant goes to the first live waiter queued, first in the order
// the checker saw the participants queue (not Redis's queue), whether the
// lock was released or its lease lapsed; a waiter keeps its place for its
// whole wait, and the checker's order follows the server's queue, not the
// replies (an attempt whose reply was lost has queued). A waiter's patience
// is its own: a step of the server's clock does not end it, and a waiter
// is live until its deadline by its own clock (or its give-up reaches the
// server). A free resource with a live waiter queued that can act (not
// paused, not waiting to resend) is granted within a second of the
// waiters' clock (their longest sleep). A restart without persistence
// loses the order, as documented (docs/reliability.md), and so does a
// queue that expires while its waiters are paused or the server's clock
// steps past it; a waiter whose turn came in a grant it could not use
// and that never learnt its place (its reply lost) queues anew.
//
// Entries: no queue entry outlives its waiter by more than the documented
// bound: a release never hands the lock to a waiter whose wait has ended
// (dead, gave up, or holding already), which would cost the lock a ttl,
// unless that waiter took a grant a message handed it (a forged one) and
// its Locker remembers it: then its Locker passes the grant on before time
// passes, a round trip (unless it is paused or dead). A queue with no live
// waiter queued is gone within the holder's ttl plus ten seconds.
//
// Tokens: every fencing token granted is above every token granted before,
// across restarts (the clock floor); every term that takes office is above
// the terms before it. A path that both restarts the server and steps its
// clock back is exempt, as documented (a clock that goes back further than
// the outage lasted); a step grants nothing (a lapsed lease a step back
// makes live again was granted before). With Config.Source, a token a
// participant holds once its stamp's reply said held is above every token
// held before it, and so is a term, with no path exempt: the source's
// tokens are what the fence sees, and the Redis counter's are held to
// nothing.
//
// LeaderRead: a read of an election reports the leader the keys hold: the
// lock's live grant when the leader key names it, and the leader's value.
//
// Replies: every reply parses as the client expects.
//
// # Coverage
//
// Efficiency and correctness locks, a semaphore (limit 1 or 2 with 3
// participants in the tests), and an election's candidates and its one-read
// Leader. Not modelled: Observe's subscription and its timers; the Go
// client's goroutines (the keeper, the strays' sweeps; a Locker's release
// of a grant it heard of, and the calls that serve a queue on after a
// release, hold up the participant rather than run beside it);
// how long a Locker remembers what its waiters took (the model keeps it as
// long as a message can name it; the Core for a ttl and ten seconds past
// the lease, 4,096 at most); a reply that comes late without being lost
// (a late grant comes only from a resend), and more than one lost reply in
// one move (a resend's reply is not lost again); the late-grant limit of
// three in a row and a lone try's limit of 2,000 settling calls; a token
// source that fails (under Config.Source it only times out, at the
// lease's deadline), and a lock that switches sources; under Config.Plain,
// the Core's question of which plain commands the server has (COMMAND
// INFO), a plain command it refuses, the Core's skipping the plain path
// for a lock seen contended, and a Release that failed after its DELEX
// was written (Held.deleteSent: every send here gets a reply); Replicas
// (WAIT); the network's and the processes' real timing (the process-level
// chaos tests in internal/reliability/processes cover those); Redis
// Cluster; a step of a real server's clock in a replay.
package model

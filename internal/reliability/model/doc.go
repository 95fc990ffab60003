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
// of handoff.go), sleeps until a grant message or its timer (the holder's
// ttl, at most a second), releases, refreshes, gives up (release.lua taking
// its entries out of the queue, as waiter.leave does), pauses and resumes,
// or dies (its subscription goes, and PUBSUB NUMSUB stops counting it). A
// candidate in an election also takes office (election_announce.lua),
// resigns with its release (election_resign.lua), and anyone reads the
// leader (election_leader.lua). The environment advances the clock to the
// next deadline (a key's or a permit's expiry, a waiter's timer, a holder's
// keeper due to refresh), loses or duplicates a grant message, forges one,
// or restarts the server without persistence. Messages are delivered in no
// set order and as late as any interleaving makes them: a waiter reads any
// message in flight to it. A participant that is not paused acts when it
// must (about to attempt, or its timer fired) before time passes. Faults
// are budgeted per path (Faults).
//
// Publishing is taken out of miniredis's hands and into the checker's (a
// message in flight is part of the state); subscriptions are miniredis's
// own, so that the scripts' PUBSUB NUMSUB counts them. miniredis's clock
// moves only when the checker moves it, and TIME in a script follows it.
//
// # Exploration
//
// A state is the server (every key's type, content and ttl, the clock, the
// subscribed channels), each participant's abstract state, the messages in
// flight, the faults left and what the invariants track. Explore goes
// breadth first, so a violation comes with one of the shortest paths to
// it, and deduplicates states up to a permutation of the participants'
// names. It rebuilds a state in miniredis to expand it (cheaper than
// replaying its path, which costs a script run a step) and remembers what
// each operation did to each server state. Walk goes further on seeded
// random walks. Result reports the distinct states reached. Replay runs a
// schedule on a real redis-server beside miniredis, and compares them step
// by step.
//
// # Invariants
//
// OneGrant: a lock holds at most one live grant, and passes from one owner
// to another only by the first's release; a semaphore holds at most its
// limit of live permits.
//
// Looks: every grant a participant believes it holds is the one the key
// holds, or the participant learns otherwise at its next look: a refresh
// or release says "held" exactly when the server held that grant, and a
// grant a participant's own command reports is on the server.
//
// FIFO: a grant goes to the first live waiter queued, first in the order
// the checker saw the participants queue (not Redis's queue), whether the
// lock was released or its lease lapsed; and a free resource with a live
// waiter queued that can act (not paused) is granted within a second (the
// waiters' longest sleep). A restart without persistence loses the order,
// as documented (docs/reliability.md), and so does a queue that expires
// while its waiters are paused.
//
// Entries: no queue entry outlives its waiter by more than the documented
// bound: a release never hands the lock to a waiter whose wait has ended
// (dead, gave up, or holding already), which would cost the lock a ttl;
// and a queue with no live waiter queued is gone within the holder's ttl
// plus ten seconds.
//
// Tokens: every fencing token granted is above every token granted before,
// across restarts (the clock floor); every term that takes office is above
// the terms before it.
//
// LeaderRead: a read of an election reports the leader the keys hold: the
// lock's grant when the leader key names it.
//
// Replies: every reply parses as the client expects.
//
// # Coverage
//
// Efficiency and correctness locks, a semaphore (limit 2 with 3
// participants in the tests), and an election's candidates and its one-read
// Leader. Not modelled: Observe's subscription and its timers; the Go
// client's goroutines (the keeper, strays, the notifier's buffering beyond
// one message per waiter); lost or late replies to commands (go-redis
// retries); the late-grant limit of three in a row; the network's and the
// processes' real timing (the process-level chaos tests in
// internal/reliability/processes cover those); Redis Cluster.
package model

// Package scripts holds the Lua scripts that leasekit runs on Redis, one .lua
// file per operation, and the shell commands its README runs (test.sh,
// bench.sh).
//
// Each .lua file's header comment names its KEYS, ARGV and reply. A reply code
// (a number that says what the call did, rather than a ttl or a token) stands
// on a line of its own, indented two spaces past the prose, alone or as the
// first element of a table: "--   -1  another owner holds it"; a test holds
// the engine's constants for the codes it reads (internal/lease/replies.go)
// against those lines. Every script of a lock or a semaphore starts with
// prelude.lua, what they share (prelude.go gives it Linger). The three that
// grant a lock (fenced_acquire, wait,
// release) have grant.lua, the function they share, prepended; the ones that
// queue waiters or hand a grant to one (wait, release and the semaphore's),
// and inspect, queue.lua; the semaphore's (sem_*, but sem_pttl), semaphore.lua
// after it; the two of a register (register_write, register_claim),
// register_fence.lua; and the election's and inspect, which read a lock's
// lease without holding it, lease.lua. The scripts are embedded at build time
// and exported as *redis.Script values, for leasekit's packages and for tools
// that must speak the same protocol on the same keys (a test, a repair
// script); leasekit runs them with EVALSHA, and EVAL when the server does not
// have one cached (internal/lease's Script.Run). The handoff's wire format,
// which wait.lua and release.lua read and write, is specified in
// internal/lease/handoff.go.
//
// Not every command leasekit sends is a script: the efficiency acquire is a
// plain SET NX PX, a Register's read an HMGET, the correctness audit CONFIG
// GET and INFO, lockrun's -status PTTL and GET. Those live with the code that
// sends them.
//
// Every script is idempotent under a client retry: go-redis resends a
// command whose reply was lost, and the same owner acquiring again gets the
// same grant (and, for fenced locks, the same token) back; a release or a
// break that took effect leaves a mark that its resend reports from
// (release.lua). docs/reliability.md, "Commands sent again", has each.
package scripts

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed grant.lua
	grantSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed pttl.lua
	pttlSrc string
	//go:embed fenced_acquire.lua
	fencedAcquireSrc string
	//go:embed register_fence.lua
	registerFenceSrc string
	//go:embed register_write.lua
	registerWriteSrc string
	//go:embed register_claim.lua
	registerClaimSrc string
	//go:embed wait.lua
	waitSrc string
	//go:embed election_announce.lua
	electionAnnounceSrc string
	//go:embed election_leader.lua
	electionLeaderSrc string
	//go:embed election_resign.lua
	electionResignSrc string
	//go:embed election_proclaim.lua
	electionProclaimSrc string

	//go:embed queue.lua
	queueSrc string
	//go:embed lease.lua
	leaseSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed sem_inspect.lua
	semInspectSrc string

	//go:embed semaphore.lua
	semaphoreSrc string
	//go:embed sem_acquire.lua
	semAcquireSrc string
	//go:embed sem_wait.lua
	semWaitSrc string
	//go:embed sem_release.lua
	semReleaseSrc string
	//go:embed sem_refresh.lua
	semRefreshSrc string
	//go:embed sem_pttl.lua
	semPTTLSrc string
)

var (
	// Release ends a grant the caller holds: it hands the lock to the first
	// live waiter in the lock's queue, or deletes it and publishes a wake-up.
	// See release.lua.
	Release = redis.NewScript(prelude + grantSrc + queueSrc + releaseSrc)

	// Wait is a waiter's attempt: it takes a free lock or joins the lock's
	// queue. See wait.lua.
	Wait = redis.NewScript(prelude + grantSrc + queueSrc + waitSrc)

	// Refresh restarts the ttl of a lock the caller holds. See refresh.lua.
	Refresh = redis.NewScript(prelude + refreshSrc)

	// PTTL reports the remaining ttl of a lock the caller holds. See pttl.lua.
	PTTL = redis.NewScript(prelude + pttlSrc)

	// FencedAcquire takes a free correctness lock with a new fencing token, or
	// replies with the holder's remaining ttl. See fenced_acquire.lua.
	FencedAcquire = redis.NewScript(prelude + grantSrc + fencedAcquireSrc)

	// RegisterWrite stores a value in a fenced register if the writer's token
	// is at least the highest one that claimed or wrote it. See
	// register_write.lua.
	RegisterWrite = redis.NewScript(registerFenceSrc + registerWriteSrc)

	// RegisterClaim raises a fenced register's fence to the claimer's token,
	// if no newer token claimed or wrote it, and returns its value; given a
	// retention (the proxy store's), it restarts the key's expiry, and holds
	// a missing register to the clock floor. See register_claim.lua.
	RegisterClaim = redis.NewScript(registerFenceSrc + registerClaimSrc)

	// ElectionAnnounce makes the holder of an election's lock its leader: it
	// stores the leader's value and tells the observers. See
	// election_announce.lua.
	ElectionAnnounce = redis.NewScript(prelude + leaseSrc + electionAnnounceSrc)

	// ElectionLeader reads an election's leader with its lock. See
	// election_leader.lua.
	ElectionLeader = redis.NewScript(prelude + leaseSrc + electionLeaderSrc)

	// ElectionResign clears the leader key of a term that has ended, and
	// tells the observers when nobody holds the lock. See
	// election_resign.lua.
	ElectionResign = redis.NewScript(prelude + leaseSrc + electionResignSrc)

	// Inspect reads whether a lock is held, for how long, by which token,
	// and how many live waiters queue for it, changing nothing. See
	// inspect.lua.
	Inspect = redis.NewScript(prelude + leaseSrc + queueSrc + inspectSrc)

	// SemInspect reads a semaphore's limit, live permits and live waiters,
	// changing nothing. See sem_inspect.lua.
	SemInspect = redis.NewScript(prelude + queueSrc + semaphoreSrc + semInspectSrc)

	// ElectionProclaim changes the value the election reports for the
	// leader of a term, while it is in office. See election_proclaim.lua.
	ElectionProclaim = redis.NewScript(prelude + leaseSrc + electionProclaimSrc)

	// SemAcquire takes a permit of a semaphore if one is free once the
	// waiters queued first are served, or replies with the ms until the
	// first live permit expires. See sem_acquire.lua.
	SemAcquire = redis.NewScript(prelude + queueSrc + semaphoreSrc + semAcquireSrc)

	// SemWait is a waiter's attempt for a permit: it keeps its place in the
	// semaphore's queue and hands free permits out in queue order. See
	// sem_wait.lua.
	SemWait = redis.NewScript(prelude + queueSrc + semaphoreSrc + semWaitSrc)

	// SemRelease ends a permit the caller holds and hands free permits to
	// the first live waiters. See sem_release.lua.
	SemRelease = redis.NewScript(prelude + queueSrc + semaphoreSrc + semReleaseSrc)

	// SemRefresh restarts the ttl of a permit the caller holds. See
	// sem_refresh.lua.
	SemRefresh = redis.NewScript(prelude + queueSrc + semaphoreSrc + semRefreshSrc)

	// SemPTTL reports the remaining ttl of a permit the caller holds. See
	// sem_pttl.lua.
	SemPTTL = redis.NewScript(prelude + semPTTLSrc)
)

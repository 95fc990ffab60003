// Package scripts is leasekit's wire protocol, and the only code that speaks
// it: the Lua scripts leasekit runs on Redis (one .lua file per operation),
// the key layout (keys.go), every string the scripts store or publish
// (wire.go: values, queue entries, grant messages, headers), and a typed
// reader for every script's reply (replies.go). The engine
// (internal/lease), the faces, the tools and the tests call these; none of
// them reads a reply code or parses a value itself. docs/protocol.md lists
// the states of a lock and of a permit and which script moves between them
// (TestStates holds it against the scripts).
//
// A Script is its name, its source and its keys/args contract: the package
// sends nothing and ties leasekit to no Redis client. A runner in the engine
// sends a script with EVALSHA, and EVAL when the server has not cached it.
//
// What is public API (CONTRIBUTING, "Public API"): the key layout and the
// wire format's Value, which an operator's repair script may read. The
// Script values, the readers and their types follow the protocol, which may
// change in any release: they are exported for leasekit's own packages.
//
// Each .lua file's header comment names its KEYS, ARGV and reply. A reply
// is a number or a string (docs/protocol.md, "Cost"): a string of fields,
// each after one space, the code first; only the scripts read rarely
// (inspect, sem_inspect, election_leader) reply tables. A reply code (a
// number that says what the call did, rather than a ttl or a token) stands
// on a line of its own, indented two spaces past the prose, alone or first
// in its fields: "--   -1  another owner holds it";
// TestReplyCodesMatchTheScripts holds the readers' codes against those
// lines. The shared files hold the functions scripts share: prelude.lua
// (the clock, a lock's value, the restart of a lease), grant.lua (the
// grant of a lock), queue.lua (the wait queue and its handoff),
// semaphore.lua (permits), lease.lua (a lock's lease read by one that does
// not hold it) and register_fence.lua (a register's fence). Each script's
// source is those of their functions it calls, and those they call, then
// its own file (newScript).
//
// Not every command leasekit sends is a script: the efficiency acquire is a
// plain SET NX PX, a Register's read an HMGET, the correctness audit CONFIG
// GET and INFO. Those live with the code that sends them, and read what
// they get with this package's readers.
//
// Every script is idempotent under a client retry: a client resends a
// command whose reply was lost, and the same owner acquiring again gets the
// same grant (and, for fenced locks, the same token) back; a release or a
// break that took effect leaves a mark that its resend reports from
// (release.lua). docs/reliability.md, "Commands sent again", has each.
package scripts

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"regexp"
	"strings"
)

// Script is one script of the protocol.
type Script struct {
	// Name is the script's file name without ".lua": "release".
	Name string
	// Source is the text sent to Redis: the preludes the script needs,
	// then the script.
	Source string
	// Keys and Args say what each of KEYS and ARGV holds, in order, as the
	// script's header lists them.
	Keys, Args []string
	// ReadOnly says the script never writes: a runner sends it flagged
	// (Flagged) where the server takes script flags.
	ReadOnly bool
	hash     string
}

// NoWrites is the shebang line that flags a script as one that never
// writes (Redis 7.0 and later, Valkey): the server then knows so before it
// runs, lets it run where writes are refused (a read-only replica, EVAL_RO,
// an out-of-memory server), and refuses any write it would try. A server
// before 7.0, or miniredis, refuses to compile a script that starts with
// it.
const NoWrites = "#!lua flags=no-writes\n"

// Flagged is the source of a ReadOnly script flagged NoWrites: what a
// runner sends where the server takes script flags.
func (s *Script) Flagged() string { return NoWrites + s.Source }

// readOnly marks s as a script that never writes.
func readOnly(s *Script) *Script {
	s.ReadOnly = true
	return s
}

// Hash is the hex SHA1 digest of the source, as EVALSHA takes it.
func (s *Script) Hash() string { return s.hash }

// header matches a line of a script's header that says what one of KEYS
// or ARGV holds, "-- KEYS[2]  the lock's wait queue", or what all of KEYS
// hold, "-- KEYS     the permits and the wait queue".
var header = regexp.MustCompile(`(?m)^-- (KEYS|ARGV)(?:\[(\d+)\])?\s+(.*)$`)

// newScript is the script whose source is parts, the last of them the
// script's own file, whose header lists its keys and arguments, and the
// others the shared files it may call: of those, the source has only what
// the script calls (used). A file may say where the functions that only its
// rest calls go, with a line "-- (shared functions)": Redis builds each
// function anew on every call that reaches its definition, so a script
// whose common path needs few of them puts the others on the branch that
// calls them (release.lua, after its lock's value says waiters queue).
func newScript(parts ...string) *Script {
	own, libs := parts[len(parts)-1], defsOf(parts[:len(parts)-1])
	name, _, _ := strings.Cut(strings.TrimPrefix(own, "-- "), ":")
	top, rest := own, ""
	if m := branch.FindStringIndex(own); m != nil {
		top, rest = own[:m[1]], own[m[1]:]
	}
	placed := map[string]bool{}
	src := used(top, libs, placed) + top
	src = linger(src + used(rest, libs, placed) + rest)
	sum := sha1.Sum([]byte(src))
	s := &Script{Name: name, Source: src, hash: hex.EncodeToString(sum[:])}
	for _, m := range header.FindAllStringSubmatch(own, -1) {
		if m[1] == "KEYS" {
			s.Keys = append(s.Keys, m[3])
		} else {
			s.Args = append(s.Args, m[3])
		}
	}
	return s
}

// branch matches the line of a script's own file after which go the shared
// functions that only the code below it calls.
var branch = regexp.MustCompile(`(?m)^[ \t]*-- \(shared functions\)\n`)

// definition matches what a shared file defines: a local function, to its
// closing "end".
var definition = regexp.MustCompile(`(?ms)^local function (\w+)\(.*?^end\n`)

// comment, literal and word find a Lua comment, a quoted string, and a
// name.
var (
	comment = regexp.MustCompile(`--[^\n]*`)
	literal = regexp.MustCompile(`'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"`)
	word    = regexp.MustCompile(`[A-Za-z_]\w*`)
)

// def is a function of a shared file: its name, its text with the comment
// above it, and its code (the text without comments and quoted strings).
type def struct{ name, text, code string }

// defsOf is the functions of the shared files libs, in the files' order.
func defsOf(libs []string) []def {
	var defs []def
	for _, lib := range libs {
		at := 0
		for _, m := range definition.FindAllStringSubmatchIndex(lib, -1) {
			// The text starts at the comment above the definition: after
			// the last blank line before it.
			start := at
			if i := strings.LastIndex(lib[at:m[0]], "\n\n"); i >= 0 {
				start = at + i + 2
			}
			text := strings.TrimLeft(lib[start:m[1]], "\n")
			code := literal.ReplaceAllString(comment.ReplaceAllString(text, ""), "")
			defs = append(defs, def{lib[m[2]:m[3]], text, code})
			at = m[1]
		}
	}
	return defs
}

// used is the text of the functions of defs that code calls, and those
// they call in turn, in their files' order, less those placed already; it
// adds them to placed. Redis runs the whole text of a script on every call,
// and each function statement it reaches builds its function anew: one the
// script never calls would cost it a closure a call (docs/protocol.md,
// "Cost").
func used(code string, defs []def, placed map[string]bool) string {
	calls := map[string]bool{}
	var mark func(code string)
	mark = func(code string) {
		for _, w := range word.FindAllString(code, -1) {
			if calls[w] || placed[w] {
				continue
			}
			for _, d := range defs {
				if d.name == w {
					calls[w] = true
					mark(d.code)
				}
			}
		}
	}
	mark(literal.ReplaceAllString(comment.ReplaceAllString(code, ""), ""))
	var b strings.Builder
	for _, d := range defs {
		if calls[d.name] {
			placed[d.name] = true
			b.WriteString(d.text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

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
	//go:embed del_if_eq.lua
	delIfEqSrc string
	//go:embed expire_if_eq.lua
	expireIfEqSrc string
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
	Release = newScript(prelude, grantSrc, queueSrc, releaseSrc)

	// Wait is a waiter's attempt: it takes a free lock or joins the lock's
	// queue. See wait.lua.
	Wait = newScript(prelude, grantSrc, queueSrc, waitSrc)

	// Refresh restarts the ttl of a lock the caller holds. See refresh.lua.
	Refresh = newScript(prelude, refreshSrc)

	// PTTL reports the remaining ttl of a lock the caller holds. See pttl.lua.
	PTTL = readOnly(newScript(prelude, pttlSrc))

	// FencedAcquire takes a free correctness lock with a new fencing token, or
	// replies with the holder's remaining ttl. See fenced_acquire.lua.
	FencedAcquire = newScript(prelude, grantSrc, fencedAcquireSrc)

	// RegisterWrite stores a value in a fenced register if the writer's token
	// is at least the highest one that claimed or wrote it. See
	// register_write.lua.
	RegisterWrite = newScript(registerFenceSrc, registerWriteSrc)

	// RegisterClaim raises a fenced register's fence to the claimer's token,
	// if no newer token claimed or wrote it, and returns its value; given a
	// retention (the proxy store's), it restarts the key's expiry, and holds
	// a missing register to the clock floor. See register_claim.lua.
	RegisterClaim = newScript(registerFenceSrc, registerClaimSrc)

	// ElectionAnnounce makes the holder of an election's lock its leader: it
	// stores the leader's value and tells the observers. See
	// election_announce.lua.
	ElectionAnnounce = newScript(prelude, leaseSrc, electionAnnounceSrc)

	// ElectionLeader reads an election's leader with its lock. See
	// election_leader.lua.
	ElectionLeader = readOnly(newScript(prelude, leaseSrc, electionLeaderSrc))

	// ElectionResign clears the leader key of a term that has ended, and
	// tells the observers when nobody holds the lock. See
	// election_resign.lua.
	ElectionResign = newScript(prelude, leaseSrc, electionResignSrc)

	// Inspect reads whether a lock is held, for how long, by which token,
	// and how many live waiters queue for it, changing nothing. See
	// inspect.lua.
	Inspect = readOnly(newScript(prelude, leaseSrc, queueSrc, inspectSrc))

	// SemInspect reads a semaphore's limit, live permits and live waiters,
	// changing nothing. See sem_inspect.lua.
	SemInspect = readOnly(newScript(prelude, queueSrc, semaphoreSrc, semInspectSrc))

	// ElectionProclaim changes the value the election reports for the
	// leader of a term, while it is in office. See election_proclaim.lua.
	ElectionProclaim = newScript(prelude, leaseSrc, electionProclaimSrc)

	// SemAcquire takes a permit of a semaphore if one is free once the
	// waiters queued first are served, or replies with the ms until the
	// first live permit expires. See sem_acquire.lua.
	SemAcquire = newScript(prelude, queueSrc, semaphoreSrc, semAcquireSrc)

	// SemWait is a waiter's attempt for a permit: it keeps its place in the
	// semaphore's queue and hands free permits out in queue order. See
	// sem_wait.lua.
	SemWait = newScript(prelude, queueSrc, semaphoreSrc, semWaitSrc)

	// SemRelease ends a permit the caller holds and hands free permits to
	// the first live waiters. See sem_release.lua.
	SemRelease = newScript(prelude, queueSrc, semaphoreSrc, semReleaseSrc)

	// SemRefresh restarts the ttl of a permit the caller holds. See
	// sem_refresh.lua.
	SemRefresh = newScript(prelude, queueSrc, semaphoreSrc, semRefreshSrc)

	// SemPTTL reports the remaining ttl of a permit the caller holds. See
	// sem_pttl.lua.
	SemPTTL = readOnly(newScript(prelude, semPTTLSrc))

	// DelIfEq deletes a lock holding exactly the caller's bare grant, as
	// DELEX IFEQ does where the server has it. See del_if_eq.lua.
	DelIfEq = newScript(delIfEqSrc)

	// ExpireIfEq restarts the lease of a lock holding exactly the caller's
	// bare grant, as SET IFEQ PX does where the server has it. See
	// expire_if_eq.lua.
	ExpireIfEq = newScript(expireIfEqSrc)
)

// All is every script of the protocol, for tools that name or count what
// leasekit sends.
var All = []*Script{
	Release, Wait, Refresh, PTTL, FencedAcquire, RegisterWrite, RegisterClaim,
	ElectionAnnounce, ElectionLeader, ElectionResign, ElectionProclaim,
	Inspect, SemInspect, SemAcquire, SemWait, SemRelease, SemRefresh, SemPTTL,
	DelIfEq, ExpireIfEq,
}

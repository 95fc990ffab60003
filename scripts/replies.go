package scripts

import (
	"fmt"
	"strconv"
	"strings"
)

// The readers of the scripts' replies: each turns what a script replied (as
// a Redis client returns it: int64, string, []any, nil) into a type that
// says what the call did, so that no reply code is read anywhere else. The
// codes are those the Reply section of each script's header lists, one a
// line; TestReplyCodesMatchTheScripts holds them against those lines.

// AttemptCode says what an attempt to acquire did: the first field of the
// reply of wait.lua, sem_wait.lua, and sem_acquire.lua and fenced_acquire.lua
// (which have no AttemptQueued).
type AttemptCode int64

// The codes of an attempt.
const (
	AttemptGranted AttemptCode = 1 // granted by this call
	AttemptHeld    AttemptCode = 2 // the caller's already, its ttl restarted
	AttemptQueued  AttemptCode = 3 // not granted; this call queued the entry
	AttemptWaiting AttemptCode = 0 // not granted; the entry stays queued, or none
	AttemptSettle  AttemptCode = 4 // dead entries ahead: attempt again at once
)

// Attempt is the reply of an attempt to acquire: wait, sem_wait,
// sem_acquire or fenced_acquire.
type Attempt struct {
	Code AttemptCode
	// Value is the grant's stored value, with AttemptGranted and
	// AttemptHeld. It holds the owner id: never log it.
	Value string
	// HolderTTL is the holder's remaining ms (-1: no expiry), or for a
	// semaphore the ms until the first live permit expires; Place the
	// score of the caller's entry ("" when it does not queue); Now the
	// server clock in µs (0 when the script did not read it).
	HolderTTL int64
	Place     string
	Now       int64
	// Handed is the token of a grant this attempt handed to the first live
	// waiter ("-" for an efficiency grant), or "".
	Handed string
}

// Granted reports whether the attempt holds the lock or permit.
func (a Attempt) Granted() bool { return a.Code == AttemptGranted || a.Code == AttemptHeld }

// unexpected is a reader's error for a reply of another shape. It names the
// reply's type and length only: a reply may hold an owner id.
func unexpected(reply any) error {
	if items, ok := reply.([]any); ok {
		return fmt.Errorf("unexpected reply: a table of %d elements", len(items))
	}
	if s, ok := reply.(string); ok {
		return fmt.Errorf("unexpected reply: a string of %d bytes", len(s))
	}
	return fmt.Errorf("unexpected reply of type %T", reply)
}

// ReadAttempt reads the reply of wait, sem_wait, sem_acquire or
// fenced_acquire: a string of fields (wait.lua's header).
func ReadAttempt(reply any) (Attempt, error) {
	code, rest, ok := readCode(reply)
	if !ok {
		return Attempt{}, unexpected(reply)
	}
	a := Attempt{Code: AttemptCode(code)}
	switch a.Code {
	case AttemptGranted, AttemptHeld:
		if rest == "" {
			return Attempt{}, unexpected(reply)
		}
		a.Value = rest
		return a, nil
	case AttemptWaiting, AttemptQueued, AttemptSettle:
	default:
		return Attempt{}, unexpected(reply)
	}
	f := strings.Split(rest, " ")
	if len(f) != 3 && len(f) != 4 {
		return Attempt{}, unexpected(reply)
	}
	left, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Attempt{}, unexpected(reply)
	}
	a.HolderTTL, a.Place = left, f[1]
	if f[2] != "" {
		if a.Now, err = ParseMicros(f[2]); err != nil {
			return Attempt{}, unexpected(reply)
		}
	}
	if len(f) == 4 {
		if a.Handed = f[3]; a.Handed == "" {
			return Attempt{}, unexpected(reply)
		}
	}
	return a, nil
}

// readCode splits a reply that is a string of fields into its code, the
// first field, and the rest after the space that follows it.
func readCode(reply any) (code int64, rest string, ok bool) {
	s, ok := reply.(string)
	if !ok {
		return 0, "", false
	}
	first, rest, _ := strings.Cut(s, " ")
	code, err := strconv.ParseInt(first, 10, 64)
	return code, rest, err == nil
}

// LeaseState is what a refresh, a release or a ttl read found of the
// caller's lease.
type LeaseState int

// The states a refresh, release or ttl read finds.
const (
	// LeaseHeld: the lease was the caller's (and was refreshed, or
	// released, by this call or an earlier send of it).
	LeaseHeld LeaseState = iota
	// LeaseGone: the key is gone, or the lease lapsed.
	LeaseGone
	// LeaseTaken: another owner holds the lock.
	LeaseTaken
	// LeaseBroken: an operator broke the caller's lease (Break).
	LeaseBroken
)

// The codes a refresh or release replies, where they agree. (The
// semaphore's scripts have no leaseTaken: a permit has no other owner.)
const (
	leaseHeld  int64 = 1  // refreshed, or released
	leaseGone  int64 = 0  // the key is gone, or the lease lapsed
	leaseTaken int64 = -1 // another owner holds the lock
)

// release.lua: an operator broke the caller's lease (Break), which the
// mark of the broken grant says.
const leaseBroken int64 = -3

// refresh.lua: refreshed, and the election's leader key does not hold the
// grant (the leader writes it back).
const leaderLost int64 = 2

// release.lua and sem_release.lua (which has no goneServeOn): a release
// that handed the lock or permit on, and one that stopped short at dead
// queue entries ahead of the first live waiter, after the caller's grant
// was released or found gone: the next call goes on.
const (
	releaseHanded   int64 = 2
	releasedServeOn int64 = 3
	goneServeOn     int64 = -2
)

// pttl.lua and sem_pttl.lua (which has no ttlTaken): not a ttl, but the
// caller's lease gone, or the lock another owner's.
const (
	ttlGone  int64 = -2
	ttlTaken int64 = -3
)

// states are the LeaseStates of the codes of refresh and release.
var states = map[int64]LeaseState{leaseHeld: LeaseHeld, leaseGone: LeaseGone, leaseTaken: LeaseTaken, leaseBroken: LeaseBroken}

// Refreshed is the reply of refresh or sem_refresh.
type Refreshed struct {
	Lease LeaseState
	// LeaderLost: refreshed, and the election's leader key no longer holds
	// the grant (the leader writes it back).
	LeaderLost bool
}

// ReadRefresh reads the reply of refresh or sem_refresh.
func ReadRefresh(reply any) (Refreshed, error) {
	n, ok := reply.(int64)
	if ok && n == leaderLost {
		return Refreshed{Lease: LeaseHeld, LeaderLost: true}, nil
	}
	if s, known := states[n]; ok && known && n != leaseBroken {
		return Refreshed{Lease: s}, nil
	}
	return Refreshed{}, unexpected(reply)
}

// Ended is the reply of release or sem_release: of a holder's release, of a
// release of what a waiter could not use, or of an operator's break.
type Ended struct {
	// Lease is what the call found: LeaseHeld when it ended the grant it
	// names (or an earlier send of the same call did).
	Lease LeaseState
	// Handed: the lock or a permit went to a waiter, whose grant's token
	// is Token ("-" for an efficiency grant or a permit).
	Handed bool
	Token  string
	// ServeOn: the call stopped short at dead queue entries ahead of the
	// first live waiter; the caller calls again, releasing the vacant
	// value, to go on.
	ServeOn bool
}

// Unheld reports whether the release found the caller's lease no longer the
// caller's: gone, another owner's, or broken.
func (e Ended) Unheld() bool { return e.Lease != LeaseHeld }

// ReadEnd reads the reply of release or sem_release: a code, and after a
// space the token of a grant it handed on ("-" for an efficiency grant or a
// permit).
func ReadEnd(reply any) (Ended, error) {
	n, token, ok := readCode(reply)
	if !ok || strings.Contains(token, " ") {
		return Ended{}, unexpected(reply)
	}
	e := Ended{Handed: token != "", Token: token}
	switch n {
	case releaseHanded:
		e.Lease = LeaseHeld
	case releasedServeOn:
		e.Lease, e.ServeOn = LeaseHeld, true
	case goneServeOn:
		e.Lease, e.ServeOn = LeaseGone, true
	default:
		s, ok := states[n]
		if !ok {
			return Ended{}, unexpected(reply)
		}
		e.Lease = s
	}
	// Only a handoff, or a lapsed lease's release that handed the lock
	// on, names a token.
	if e.Handed != (n == releaseHanded) && n != leaseGone {
		return Ended{}, unexpected(reply)
	}
	return e, nil
}

// ReadTTL reads the reply of pttl or sem_pttl: the lease's remaining ms (-1:
// no expiry) when LeaseHeld, else LeaseGone or LeaseTaken.
func ReadTTL(reply any) (int64, LeaseState, error) {
	n, ok := reply.(int64)
	switch {
	case !ok:
		return 0, 0, unexpected(reply)
	case n == ttlGone:
		return 0, LeaseGone, nil
	case n == ttlTaken:
		return 0, LeaseTaken, nil
	case n < 0:
		return -1, LeaseHeld, nil
	}
	return n, LeaseHeld, nil
}

// BadTokenError is a reader's error for a reply, or a key, that should hold
// a fencing token and holds Text.
type BadTokenError struct{ Text string }

func (e *BadTokenError) Error() string { return fmt.Sprintf("%q is not a fencing token", e.Text) }

// LockInfo is the reply of inspect.
type LockInfo struct {
	Held    bool
	TTL     int64 // ms left on the lease; 0 when not held, -1 without expiry
	Waiters int64 // live waiters queued
	// Token is the holder's fencing token, or when not held the counter's
	// (the last token granted); 0 for none, or an efficiency lock.
	Token uint64
}

// ReadInspect reads the reply of inspect; fenced says whether the lock's
// token is read (an efficiency lock's counter is not its). A token that does
// not parse is a *BadTokenError.
func ReadInspect(reply any, fenced bool) (LockInfo, error) {
	r, _ := reply.([]any)
	if len(r) != 4 {
		return LockInfo{}, unexpected(reply)
	}
	held, ok1 := r[0].(int64)
	ms, ok2 := r[1].(int64)
	waiters, ok3 := r[2].(int64)
	token, ok4 := r[3].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return LockInfo{}, unexpected(reply)
	}
	info := LockInfo{Held: held == 1, TTL: max(ms, -1), Waiters: waiters}
	if fenced && token != "" {
		t, err := strconv.ParseUint(token, 10, 64)
		if err != nil {
			return LockInfo{}, &BadTokenError{Text: token}
		}
		info.Token = t
	}
	return info, nil
}

// SemInfo is the reply of sem_inspect.
type SemInfo struct {
	Limit   int64 // the limit the live permits were granted under; 0: none live
	Held    int64 // live permits
	Waiters int64 // live waiters, counted as inspect counts them
}

// ReadSemInspect reads the reply of sem_inspect.
func ReadSemInspect(reply any) (SemInfo, error) {
	r, _ := reply.([]any)
	if len(r) != 3 {
		return SemInfo{}, unexpected(reply)
	}
	var n [3]int64
	for i := range n {
		v, ok := r[i].(int64)
		if !ok {
			return SemInfo{}, unexpected(reply)
		}
		n[i] = v
	}
	return SemInfo{Limit: n[0], Held: n[1], Waiters: n[2]}, nil
}

// ReadDone reads the reply of election_announce, election_proclaim or
// election_resign: whether the call did what it is for (took office,
// changed the value, told the vacancy).
func ReadDone(reply any) (bool, error) {
	switch reply {
	case int64(1):
		return true, nil
	case int64(0):
		return false, nil
	}
	return false, unexpected(reply)
}

// Office is what election_leader found of an election's lock.
type Office int

// The states of an election's lock.
const (
	OfficeFree    Office = iota // nobody holds the lock (or its lease lapsed)
	OfficeWaiting               // its holder has not taken office
	OfficeLeading               // its holder leads
)

// Sighting is the reply of election_leader.
type Sighting struct {
	Office Office
	TTL    int64  // the lease's remaining ms (-1: no expiry)
	Term   uint64 // the leader's term, its grant's token (OfficeLeading)
	Value  string // the leader's value, when the call asked for it
}

// ReadLeader reads the reply of election_leader; withValue says whether the
// call asked for the leader's value (ARGV[1] = '1').
func ReadLeader(reply any, withValue bool) (Sighting, error) {
	r, _ := reply.([]any)
	if len(r) == 0 {
		return Sighting{}, unexpected(reply)
	}
	code, ok := r[0].(int64)
	if !ok {
		return Sighting{}, unexpected(reply)
	}
	leading := 3
	if withValue {
		leading = 4
	}
	switch {
	case Office(code) == OfficeFree && len(r) == 1:
		return Sighting{Office: OfficeFree}, nil
	case Office(code) == OfficeWaiting && len(r) == 2, Office(code) == OfficeLeading && len(r) == leading:
	default:
		return Sighting{}, unexpected(reply)
	}
	ms, ok := r[1].(int64)
	if !ok {
		return Sighting{}, unexpected(reply)
	}
	s := Sighting{Office: Office(code), TTL: ms}
	if s.Office == OfficeWaiting {
		return s, nil
	}
	digits, ok := r[2].(string)
	term, err := ParseToken(digits)
	if !ok || err != nil {
		return Sighting{}, unexpected(reply)
	}
	s.Term = term
	if withValue {
		if s.Value, ok = r[3].(string); !ok {
			return Sighting{}, unexpected(reply)
		}
	}
	return s, nil
}

// The refusals of a fenced register's scripts (register_fence.lua).
const (
	RefusedCorrupt = "corrupt" // a field holds no token: Field, Text
	RefusedStale   = "stale"   // a newer token claimed or wrote it: Bound
	RefusedFloor   = "floor"   // the token is below the clock floor: Bound
	RefusedAhead   = "ahead"   // the token is beyond the clock ceiling: Bound
)

// Fenced is the reply of register_write or register_claim.
type Fenced struct {
	// Refused is "" when the write or claim took effect, else one of the
	// Refused constants.
	Refused string
	// Field and Text: the corrupt field and what it holds.
	Field, Text string
	// Bound is the token a refusal names: the highest, the floor, or the
	// ceiling.
	Bound uint64
	// Writer and Value, of a claim: the token that wrote the value (0: none)
	// and the value (nil: none).
	Writer uint64
	Value  []byte
}

// ReadFence reads the reply of register_write or register_claim. A token in
// it that does not parse is a *BadTokenError.
func ReadFence(reply any) (Fenced, error) {
	r, _ := reply.(string)
	f := strings.SplitN(r, " ", 3)
	switch word := f[0]; {
	case r == "ok": // register_write stored the value
		return Fenced{}, nil
	case word == "ok" && len(f) >= 2:
		writer, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return Fenced{}, &BadTokenError{Text: f[1]}
		}
		fenced := Fenced{Writer: writer}
		if len(f) == 3 {
			fenced.Value = []byte(f[2])
		}
		return fenced, nil
	case word == RefusedCorrupt && len(f) == 3:
		return Fenced{Refused: word, Field: f[1], Text: f[2]}, nil
	case (word == RefusedStale || word == RefusedFloor || word == RefusedAhead) && len(f) == 2:
		bound, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return Fenced{}, &BadTokenError{Text: f[1]}
		}
		return Fenced{Refused: word, Bound: bound}, nil
	}
	return Fenced{}, unexpected(reply)
}

// ReadRegister reads a fenced register's value and token as HMGET of its
// fields value and token returns them: nil and 0 for a register never
// written. A token that does not parse is a *BadTokenError.
func ReadRegister(fields []any) (value []byte, token uint64, err error) {
	if len(fields) != 2 || fields[0] == nil || fields[1] == nil {
		return nil, 0, nil
	}
	v, _ := fields[0].(string)
	t, _ := fields[1].(string)
	if token, err = strconv.ParseUint(t, 10, 64); err != nil {
		return nil, 0, &BadTokenError{Text: t}
	}
	return []byte(v), token, nil
}

// The error replies scripts give on purpose start with a word of their own.
const (
	refusedFence = "BADFENCE " // grant.lua: the fence counter holds no token
	refusedLimit = "LIMIT "    // semaphore.lua: permits live under another limit
)

// BadFence reports whether msg, an error reply's text, is a granting
// script's refusal of a fence counter that holds no token, and returns what
// the refusal says of it.
func BadFence(msg string) (string, bool) { return strings.CutPrefix(msg, refusedFence) }

// OtherLimit reports whether msg, an error reply's text, is a semaphore
// script's refusal of permits live under another limit, and returns that
// limit as the reply gives it.
func OtherLimit(msg string) (string, bool) { return strings.CutPrefix(msg, refusedLimit) }

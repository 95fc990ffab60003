package lease

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/leasekit/leasekit/scripts"
)

// The handoff's wire format. This file builds and parses every string of it;
// the scripts that read and write them on the server (wait.lua, release.lua)
// point here.
//
// A lock's value is its grant:
//
//	value    = owner [ ":" token ] [ "*" [ expiry ] ]
//
// owner is the holder's owner id (no space, no ':', no '*'), token the
// fencing token in decimal (fenced kinds only). The mark "*" says waiters
// have waited for this grant, so its release must look at the queue; every
// script that compares a value accepts it with or without the mark, and none
// returns it. expiry is the lease's expiry on the server's clock in ms: a
// marked key outlives its lease by Linger, so that nobody takes the lock
// with a plain SET NX while waiters queue for it. A lease whose expiry has
// passed has lapsed (its holder died or froze): the lock is free, and
// whoever finds it so (a waiter's attempt, a release, an acquire through
// the wait script) hands it to the first live waiter, as a release would.
// A mark without expiry is on a key set by hand without one.
//
// The vacant value "*0" (no owner, a lapsed lease) holds the lock for the
// queue while a call that serves it stopped short at dead entries ahead of
// the first live waiter (no call looks at more than a hundred): the
// next call goes on (the releaser's, with value "", or a waiter's attempt).
//
// A queue entry is a member of the lock's wait queue (QueueKey: a sorted set
// scored by place, the server clock in µs when the waiter first queued, kept
// increasing):
//
//	entry    = owner SP ttl SP kind SP patience SP ticket SP channel
//	ttl      = the lease length in ms: digits, no leading zero
//	kind     = "e" | "f" | "c" | "t"   (see scripts/grant.lua)
//	patience = "0"
//	ticket   = id "." gen
//	channel  = the pub/sub channel of the waiter's Locker (the rest)
//
// id is the waiter's random id, which its Locker's Notifier routes grant
// messages by: every subscriber of a channel reads its messages, and an owner
// id would let one release the lock. gen counts the waiter's entries: a waiter
// whose entry left the queue without a grant it could use (handed over while
// it was paused, skipped, lost in a restart) queues again at its place with
// the next gen, so that a message for an earlier entry is never taken for the
// current one.
//
// patience was the ms from place after which the waiter had given up,
// judged by the server's clock: a forward step of that clock spent it, and
// releases skipped the first waiter in line. A waiter now takes its entry
// out itself when it gives up (or its Locker does, once Redis answers:
// strays.go), and writes 0, which releases before this one read as "never
// gives up"; no release judges it.
//
// A grant message is what a release that handed the lock over publishes on
// the entry's channel:
//
//	message  = ticket SP token SP seconds SP micros [ SP limit ]
//	token    = the new fencing token, or "-" for an efficiency grant
//	seconds, micros = the server clock at the grant, as TIME gives it
//	limit    = for a semaphore's permit, the limit it was granted under
//
// A waiter handed a permit under a limit other than its own releases it and
// fails with LimitMismatch: the permits live were granted under the other.
//
// A bare ticket is no grant: the waiter's counter holds no token, and its
// next attempt meets that error itself.
//
// A semaphore's permits are a sorted set (PermitsKey) of owner ids scored
// by their expiry, the server clock in ms; its waiters queue as a lock's do.
// Its header, the one member of the same set scored below 0, says what the
// live permits were granted under; one key holds both, so that a permit
// cannot outlive its limit:
//
//	header   = "#" limit [ "*" ]     scored -expiry
//	limit    = the limit, in decimal
//	expiry   = the server clock in ms when the key expires: at least the
//	           last permit's expiry
//
// The mark "*" says a waiter that does not queue has waited, so a release
// that hands no permit over wakes such waiters. A header left when no permit
// is live any more means nothing: the next acquire writes its own.

// queuedMark starts the mark of waiters at the end of a lock's value.
const queuedMark = "*"

// Linger is how long a key whose value carries the mark of waiters
// outlives its lease; the queue outlives the holder's lease as long.
const Linger = scripts.Linger * time.Millisecond

// Value is a lock's value, parsed.
type Value struct {
	Owner string
	// Token is the fencing token, or 0 for an efficiency grant.
	Token uint64
	// Queued says the value carries the mark of waiters, and Expiry is the
	// lease's expiry the mark records, in ms on the server's clock; -1 when
	// the value records none.
	Queued bool
	Expiry int64
}

// errNoToken is ParseValue's error for a value whose token does not parse.
var errNoToken = errors.New("the token is not a positive 64-bit integer")

// ParseValue parses a lock's value as GET returns it. fenced says whether
// the value must carry a token.
func ParseValue(v string, fenced bool) (Value, error) {
	p := Value{Expiry: -1}
	v, mark, queued := strings.Cut(v, queuedMark)
	p.Queued = queued
	if n, err := strconv.ParseInt(mark, 10, 64); queued && err == nil && n >= 0 {
		p.Expiry = n
	}
	if !fenced {
		p.Owner = v
		return p, nil
	}
	owner, digits, ok := strings.Cut(v, ":")
	token, err := strconv.ParseUint(digits, 10, 64)
	if !ok || err != nil || token == 0 {
		return Value{Owner: owner, Queued: p.Queued, Expiry: p.Expiry}, errNoToken
	}
	p.Owner, p.Token = owner, token
	return p, nil
}

// LeaseLeft is what is left of the lease whose value is p, given its key's
// remaining ttl (PTTL): a marked key outlives its lease by Linger.
// Negative: no expiry; 0: the lease has lapsed.
func (p Value) LeaseLeft(pttl time.Duration) time.Duration {
	switch {
	case pttl < 0:
		return -1
	case p.Expiry < 0:
		return pttl
	}
	return max(pttl-Linger, 0)
}

// entry is a waiting acquire's queue entry, in every generation.
type entry struct {
	head    string // "owner ttl kind 0 id."
	channel string
	id      string
	gen     int
	// place is the entry's score once an attempt queued it, else "".
	place string
	// sent and server are when the latest attempt that found the entry
	// queued (or queued it) was sent, and the server clock in µs when it
	// ran: a grant made after that attempt is measured from them.
	sent   time.Time
	server int64
}

// newEntry is the queue entry of a's waiter, with random id, which hears of
// grants on channel.
func (a *acquire) newEntry(id, channel string) *entry {
	head := a.owner + " " + strconv.FormatInt(Millis(a.ttl), 10) + " " + a.c.kind + " 0 " + id + "."
	return &entry{head: head, channel: channel, id: id}
}

// text is the wire form of generation gen of the entry.
func (e *entry) text(gen int) string {
	return e.head + strconv.Itoa(gen) + " " + e.channel
}

// message is a grant message, parsed.
type message struct {
	id    string
	gen   int
	token string // "-" for an efficiency grant
	at    int64  // server clock at the grant, µs
	limit int    // a permit's limit; 0 for a lock's grant
}

// parseMessage parses a grant message; ok is false for one that is no grant
// (a bare ticket) or does not parse (from a release of another version).
func parseMessage(msg string) (m message, ok bool) {
	f := strings.Fields(msg)
	if len(f) == 5 {
		if m.limit, _ = strconv.Atoi(f[4]); m.limit < 1 {
			return message{}, false
		}
		f = f[:4]
	}
	if len(f) != 4 {
		return message{}, false
	}
	id, gen, ok1 := strings.Cut(f[0], ".")
	g, err1 := strconv.Atoi(gen)
	sec, err2 := strconv.ParseInt(f[2], 10, 64)
	usec, err3 := strconv.ParseInt(f[3], 10, 64)
	// seconds bounded so that the sum cannot overflow
	if !ok1 || err1 != nil || err2 != nil || err3 != nil || sec < 0 || sec >= 1<<43 || usec < 0 || usec >= 1_000_000 {
		return m, false
	}
	return message{id: id, gen: g, token: f[1], at: sec*1_000_000 + usec, limit: m.limit}, true
}

// value is what the grant a message reports stored for owner.
func (m message) value(owner string) string {
	if m.token == "-" {
		return owner
	}
	return owner + ":" + m.token
}

// start is when the grant a message reports began, at the latest, on the
// local clock: the entry's attempt was sent at e.sent and ran at e.server on
// the server's clock, and the grant came m.at-e.server later. A wait longer
// than the one seen here means the server's clock stepped forward, and one
// below zero that it stepped back: then only the send time is sure.
func (m message) start(e *entry) time.Time {
	waited := time.Duration(m.at-e.server) * time.Microsecond
	if waited < 0 || waited > time.Since(e.sent) {
		return e.sent
	}
	return e.sent.Add(waited)
}

// HeaderLimit is the limit a semaphore's header records, given the member
// of the permits set scored below 0 (as ZRANGE returns it), and false for
// one that does not parse.
func HeaderLimit(member string) (int, bool) {
	digits, ok := strings.CutPrefix(strings.TrimSuffix(member, "*"), "#")
	n, err := strconv.Atoi(digits)
	return n, ok && err == nil && n > 0
}

// EntryTicket returns the id in a queue entry's ticket and the channel its
// grant message goes to: what a tool watching a queue (the bench) may read of
// it, never the owner id.
func EntryTicket(entry string) (id, channel string, ok bool) {
	f := strings.SplitN(entry, " ", 6)
	if len(f) != 6 {
		return "", "", false
	}
	id, _, ok = strings.Cut(f[4], ".")
	return id, f[5], ok && f[5] != ""
}

// GrantTicket returns the id in the ticket of a grant message.
func GrantTicket(msg string) (id string, ok bool) {
	m, ok := parseMessage(msg)
	return m.id, ok
}

package scripts

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// The wire format: every string the scripts store or publish, and the Go
// that builds and reads each. Nothing outside this package parses one.
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
//	kind     = "e" | "f" | "c" | "t"   (see grant.lua)
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
// out itself when it gives up (or its Locker does, once Redis answers),
// and writes 0, which releases before this one read as "never gives up";
// no release judges it.
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
//
// An election's leader key (LeaderKey) is a hash: "grant", the value of the
// leader's grant, and "value", what the leader proclaims. Its channel
// carries "elected <term>" and "vacant <term>" notices.

// QueuedMark starts the mark of waiters at the end of a lock's value.
const QueuedMark = "*"

// Vacant is the value of a lock held for its queue while dead entries are
// served (see the format above).
const Vacant = "*0"

// Linger is how long a key whose value carries the mark of waiters
// outlives its lease; the queue outlives the holder's lease as long.
const Linger = LingerMillis * time.Millisecond

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

// ErrNoToken is ParseValue's error for a value whose token does not parse.
var ErrNoToken = errors.New("the token is not a positive 64-bit integer")

// ParseValue parses a lock's value as GET returns it. fenced says whether
// the value must carry a token; without one the error is ErrNoToken, and the
// Value still has the owner and the mark.
func ParseValue(v string, fenced bool) (Value, error) {
	p := Value{Expiry: -1}
	v, mark, queued := strings.Cut(v, QueuedMark)
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
		return Value{Owner: owner, Queued: p.Queued, Expiry: p.Expiry}, ErrNoToken
	}
	p.Owner, p.Token = owner, token
	return p, nil
}

// Grant is the value v without its mark of waiters: the grant as a holder's
// release or an operator's break names it.
func Grant(v string) string {
	grant, _, _ := strings.Cut(v, QueuedMark)
	return grant
}

// GrantValue is the value a grant of token (0: an efficiency grant) to owner
// stores, without a mark.
func GrantValue(owner string, token uint64) string {
	if token == 0 {
		return owner
	}
	return owner + ":" + strconv.FormatUint(token, 10)
}

// Marked is the value of grant with the mark of waiters and the lease's
// expiry, in ms on the server's clock.
func Marked(grant string, expiry int64) string {
	return grant + QueuedMark + strconv.FormatInt(expiry, 10)
}

// AnyGrant is the release value that matches any grant of the owner of the
// grant value v, whatever its token: "owner:" for a fenced grant (the
// release script's prefix match), and "", which matches none, for an
// unfenced one.
func AnyGrant(v string) string {
	if owner, _, fenced := strings.Cut(v, ":"); fenced {
		return owner + ":"
	}
	return ""
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

// EntryHead is the part of a queue entry that every generation shares:
// "owner ttl kind 0 id.", for the waiter owner whose grant lasts ttlMillis,
// of the lock's kind ("e", "f", "c" or "t"), whose random id is id.
func EntryHead(owner string, ttlMillis int64, kind, id string) string {
	return owner + " " + strconv.FormatInt(ttlMillis, 10) + " " + kind + " 0 " + id + "."
}

// EntryText is generation gen of the entry whose head is head (EntryHead),
// heard of on channel.
func EntryText(head string, gen int, channel string) string {
	return head + strconv.Itoa(gen) + " " + channel
}

// EntryTicket returns the id in a queue entry's ticket and the channel its
// grant message goes to: what a tool watching a queue may read of it, never
// the owner id.
func EntryTicket(entry string) (id, channel string, ok bool) {
	f := strings.SplitN(entry, " ", 6)
	if len(f) != 6 {
		return "", "", false
	}
	id, _, ok = strings.Cut(f[4], ".")
	return id, f[5], ok && f[5] != ""
}

// EntryOwner is the owner id of a queue entry: for the engine's own use and
// for tests, never to print.
func EntryOwner(entry string) string {
	owner, _, _ := strings.Cut(entry, " ")
	return owner
}

// Message is a grant message, parsed.
type Message struct {
	ID    string
	Gen   int
	Token string // "-" for an efficiency grant
	At    int64  // the server clock at the grant, µs
	Limit int    // a permit's limit; 0 for a lock's grant
}

// ParseMessage parses a grant message; ok is false for one that is no grant
// (a bare ticket) or does not parse (from a release of another version).
func ParseMessage(msg string) (m Message, ok bool) {
	f := strings.Fields(msg)
	if len(f) == 5 {
		if m.Limit, _ = strconv.Atoi(f[4]); m.Limit < 1 {
			return Message{}, false
		}
		f = f[:4]
	}
	if len(f) != 4 {
		return Message{}, false
	}
	id, gen, ok1 := strings.Cut(f[0], ".")
	g, err1 := strconv.Atoi(gen)
	sec, err2 := strconv.ParseInt(f[2], 10, 64)
	usec, err3 := strconv.ParseInt(f[3], 10, 64)
	// seconds bounded so that the sum cannot overflow
	if !ok1 || err1 != nil || err2 != nil || err3 != nil || sec < 0 || sec >= 1<<43 || usec < 0 || usec >= 1_000_000 {
		return Message{}, false
	}
	return Message{ID: id, Gen: g, Token: f[1], At: sec*1_000_000 + usec, Limit: m.Limit}, true
}

// Value is what the grant a message reports stored for owner.
func (m Message) Value(owner string) string {
	if m.Token == "-" {
		return owner
	}
	return owner + ":" + m.Token
}

// String is the message's wire form, as a release publishes it.
func (m Message) String() string {
	s := m.ID + "." + strconv.Itoa(m.Gen) + " " + m.Token + " " +
		strconv.FormatInt(m.At/1_000_000, 10) + " " + strconv.FormatInt(m.At%1_000_000, 10)
	if m.Limit > 0 {
		s += " " + strconv.Itoa(m.Limit)
	}
	return s
}

// TicketID is the waiter id of the ticket a message starts with: a grant
// message's or a bare ticket's. A Notifier routes messages by it.
func TicketID(msg string) string {
	ticket, _, _ := strings.Cut(msg, " ")
	id, _, _ := strings.Cut(ticket, ".")
	return id
}

// HeaderLimit is the limit a semaphore's header records, given the member
// of the permits set scored below 0 (as ZRANGE returns it), and false for
// one that does not parse.
func HeaderLimit(member string) (int, bool) {
	digits, ok := strings.CutPrefix(strings.TrimSuffix(member, "*"), "#")
	n, err := strconv.Atoi(digits)
	return n, ok && err == nil && n > 0
}

// ParseToken parses a fencing token as the scripts and the counter hold it:
// a positive decimal.
func ParseToken(s string) (uint64, error) {
	t, err := strconv.ParseUint(s, 10, 64)
	if err == nil && t == 0 {
		err = ErrNoToken
	}
	return t, err
}

// ParseMicros parses a server clock in µs as the scripts print it.
func ParseMicros(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

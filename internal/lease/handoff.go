package lease

import (
	"time"

	"github.com/leasekit/leasekit/scripts"
)

// The handoff, as the engine keeps it: a waiter's queue entry in every
// generation, and when a grant message says its grant began. The wire format
// of both (and of every other string the scripts store or publish) is in
// package scripts (wire.go), which builds and parses each.

// Linger is how long a key whose value carries the mark of waiters
// outlives its lease (scripts.Linger).
const Linger = scripts.Linger

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
	head := scripts.EntryHead(a.owner, Millis(a.ttl), a.c.kind, id)
	return &entry{head: head, channel: channel, id: id}
}

// text is the wire form of generation gen of the entry.
func (e *entry) text(gen int) string {
	return scripts.EntryText(e.head, gen, e.channel)
}

// grantStart is when the grant a message reports began, at the latest, on the
// local clock: the entry's attempt was sent at e.sent and ran at e.server on
// the server's clock, and the grant came m.At-e.server later. A wait longer
// than the one seen here means the server's clock stepped forward, and one
// below zero that it stepped back: then only the send time is sure.
func grantStart(m scripts.Message, e *entry) time.Time {
	waited := time.Duration(m.At-e.server) * time.Microsecond
	if waited < 0 || waited > time.Since(e.sent) {
		return e.sent
	}
	return e.sent.Add(waited)
}

package model

import (
	"slices"
	"strconv"
)

// phase is where a participant is in its acquire.
type phase uint8

const (
	idle     phase = iota // not acquiring
	ready                 // waiting, and about to attempt (wait.lua)
	sleeping              // waiting for a grant message or its timer
	holding               // believes it holds a grant
	dead                  // never acts again
)

var phaseNames = [...]string{"idle", "ready", "sleeping", "holding", "dead"}

// client is one participant: a Locker with one goroutine that acquires,
// holds and releases, as the Go client does.
type client struct {
	phase      phase
	paused     bool
	subscribed bool   // its Locker's grant channel (kept once subscribed)
	cycle      int    // acquires begun: its owner id is its name and cycle
	e          entry  // ready, sleeping: its queue entry
	timer      int64  // sleeping: when its timer fires, ms
	value      string // holding: the grant's value
	renew      int64  // holding: when its keeper refreshes next (ttl/3 on), ms
	office     bool   // holding, in an election: it took office
	// What the checker knows: seq, its place in the order the checker saw
	// the waiters queue in (0: not seen queued in this acquire); queued,
	// whether its entry is queued as far as the protocol goes.
	seq    int
	queued bool
}

// waiting says whether the client is in a wait.
func (c *client) waiting() bool { return c.phase == ready || c.phase == sleeping }

// due says whether the client must act before time may pass.
func (c *client) due(now int64) bool {
	return !c.paused && (c.phase == ready || c.phase == sleeping && c.timer <= now)
}

// msg is a grant message in flight to client to.
type msg struct {
	to   int
	text string
}

// world is one state of the system: the server, the participants, the
// messages in flight, the faults left, and what the checker tracks.
type world struct {
	rs      redisState
	clients []client
	flight  []msg
	left    Faults
	top     string // the highest token granted so far
	// freeSince is when the resource was last found with room and a live
	// waiter queued that could act (-1: not now); lonely, when its queue
	// was last found with no live waiter queued (-1: not now).
	freeSince, lonely int64
	// term is the highest term that took office in an election.
	term string
	// lapsed says a lease lapsed since the last grant.
	lapsed bool
}

// clone is a copy of w whose slices the caller may change.
func (w *world) clone() *world {
	n := *w
	n.clients = slices.Clone(w.clients)
	n.flight = slices.Clone(w.flight)
	return &n
}

// clientName is the participant an owner id belongs to: its first letter.
func clientName(owner string) string { return owner[:1] }

// clientIndex is the index of owner's participant, and the acquire (cycle)
// the owner id belongs to; -1 for an owner id no participant has.
func clientIndex(owner string, n int) (int, int) {
	if len(owner) < 2 || owner[0] < 'A' || int(owner[0]-'A') >= n {
		return -1, 0
	}
	cycle, err := strconv.Atoi(owner[1:])
	if err != nil {
		return -1, 0
	}
	return int(owner[0] - 'A'), cycle
}

// name is participant i's name.
func name(i int) string { return string(rune('A' + i)) }

// owner is participant i's owner id in its current acquire.
func (w *world) owner(i int) string { return name(i) + strconv.Itoa(w.clients[i].cycle) }

// bit is v as a byte of an encoding.
func bit(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// rank is client i's place among the clients the checker saw queue (1 is
// first), or 0.
func (w *world) rank(i int) int {
	s := w.clients[i].seq
	if s == 0 {
		return 0
	}
	r := 1
	for j := range w.clients {
		if o := w.clients[j].seq; o != 0 && o < s {
			r++
		}
	}
	return r
}

// nextSeq is the seq of a client the checker sees queue now: after every
// other.
func (w *world) nextSeq() int {
	n := 0
	for i := range w.clients {
		n = max(n, w.clients[i].seq)
	}
	return n + 1
}

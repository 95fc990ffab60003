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
	settling              // a lone try, about to settle a resource whose queue goes first
	dead                  // never acts again
	drawing               // Config.Source: granted in Redis, about to draw its token
	stamping              // Config.Source: drew its token, about to stamp it into its grant
)

var phaseNames = [...]string{"idle", "ready", "sleeping", "holding", "settling", "dead", "drawing", "stamping"}

// client is one participant: a Locker with one goroutine that acquires,
// holds and releases, as the Go client does.
type client struct {
	phase      phase
	paused     bool
	subscribed bool   // its Locker's grant channel (kept once subscribed)
	cycle      int    // acquires begun: its owner id is its name and cycle
	giveUpAt   int64  // ready, sleeping: its context's deadline, ms (0: none)
	e          entry  // ready, sleeping: its queue entry; handed: the entry's generation
	timer      int64  // sleeping: when its timer fires, ms
	value      string // holding: the grant's value; drawing, stamping: the grant Redis made
	deadline   int64  // holding, drawing, stamping: its lease's local deadline, ms
	office     bool   // holding, in an election: it took office
	// serveUntil, when not 0, says a release of its stopped short at dead
	// queue entries: it goes on serving the queue (serveOn) until the
	// reply says it is done, or the clock reaches serveUntil (ms), and
	// resigns then the term whose grant resign names, if any.
	serveUntil int64
	resign     string
	// handed, holding: a grant message handed it the lease, to the entry
	// of generation e.gen (Held.handed); a release that finds that lease
	// lost takes the entry out of the queue (unqueue). Idle, serving the
	// queue on: it does so once done.
	handed bool
	// took are the acquires that left with a grant a message handed them,
	// as its Locker remembers them (strays.go): only those a message may
	// still name (an entry queued, or a message in flight).
	took []took
	// What the checker knows: seq, its place in the order the checker saw
	// the waiters queue in (0: not seen queued in this acquire); queued,
	// whether its entry is queued as far as the protocol goes.
	seq    int
	queued bool
	// pending is the command whose reply was lost, which the participant
	// sends again next (resend.go); nil for none. It is in the middle of
	// the move that sent it: the state above is as that command left it.
	pending *resend
	// Config.Source (stamp.go): token, stamping, is the token it drew
	// (with drawEarly, from its probe on); drawing, stamping, lone says
	// the grant came to a lone try, and waiter to an acquire past its
	// probe (an attempt's, or a grant message's, with handed), which waits
	// on with its entry e when the stamp finds the lease gone.
	token        string
	lone, waiter bool
	// Config.Plain (plain.go), holding: plain says its refresh's or
	// release's plain command missed, and the script is its next move;
	// plainAt, when that refresh was sent (ms), and resent, what the
	// checker knows of that release's DELEX if it was sent again (nil:
	// sent once).
	plain   plainStep
	plainAt int64
	resent  *resentDelete
}

// waiting says whether the client is in a wait.
func (c *client) waiting() bool { return c.phase == ready || c.phase == sleeping }

// stamps says whether the client is between its grant in Redis and its
// stamp's reply (Config.Source): still in its acquire, not yet holding.
func (c *client) stamps() bool { return c.phase == drawing || c.phase == stamping }

// timedOut says whether a waiter's deadline has passed by now (ms): its
// context has ended, and its wait with it.
func (c *client) timedOut(now int64) bool { return c.giveUpAt != 0 && now >= c.giveUpAt }

// leaving says whether the client's give-up went to the server, its reply
// lost: its wait has ended there, though not yet for it.
func (c *client) leaving() bool {
	return c.pending != nil && (c.pending.move.kind == mGiveUp || c.pending.move.kind == mTimeout)
}

// renew is when a holder's keeper would refresh next: a third of the ttl
// after its lease began.
func (c *client) renew() int64 { return c.deadline - (ttl - drift) + ttl/3 }

// tookAs is what the client's Locker remembers its acquire cycle took, and
// whether it does.
func (c *client) tookAs(cycle int) (took, bool) {
	for _, t := range c.took {
		if t.cycle == cycle {
			return t, true
		}
	}
	return took{}, false
}

// over says whether the lease the client took in acquire t is over
// (Held.over): released, found lost, or past its deadline at now (ms).
func (c *client) over(t took, now int64) bool {
	return c.phase != holding || c.cycle != t.cycle || c.value != t.value || now >= c.deadline
}

// msg is a grant message in flight to client to.
type msg struct {
	to   int
	text string
}

// route is where a participant's Locker sends a message (notify.deliver,
// strays.heard).
type route uint8

const (
	dropped  route = iota // nobody it names: dropped
	toWaiter              // to its waiter, whose grant it may be
	toStrays              // to the strays of its Locker, which remember what the waiter took
)

// route is where participant m.to's Locker sends m, given w.
func (w *world) route(m msg) route {
	cl := &w.clients[m.to]
	i, cycle := clientIndex(ticketID(m.text), len(w.clients))
	switch {
	case cl.phase == dead || i != m.to:
		return dropped
	case (cl.waiting() || cl.stamps()) && cycle == cl.cycle:
		// A waiter drawing or stamping keeps its messages, for when the
		// stamp finds the lease gone and it waits on.
		return toWaiter
	}
	if _, ok := cl.tookAs(cycle); ok {
		return toStrays
	}
	return dropped
}

// world is one state of the system: the server, the participants, the
// messages in flight, the faults left, and what the checker tracks.
type world struct {
	rs      redisState
	clients []client
	flight  []msg
	left    Faults
	// top is the highest token granted so far; with Config.Source, the
	// highest a stamp stored, and topGrant the Redis token of the grant
	// that stamp replaced. source is the last token the token source
	// drew ("" for none): it lives beside the server, and no fault of the
	// server's touches it.
	top, topGrant, source string
	// freeSince is when the resource was last found with room and a live
	// waiter queued that could act (-1: not now); lonely, when its queue
	// was last found with no live waiter queued (-1: not now).
	freeSince, lonely int64
	// term is the highest term that took office in an election.
	term string
	// skew is how far the server's clock is ahead of the participants'
	// (ms): they measure their deadlines and timers on clocks of their own
	// (monotonic), which a step of the server's clock does not move.
	skew int64
	back bool // the server's clock has stepped back
	// op is the operator who breaks the lock (operator.go).
	op operator
}

// local is the participants' clock in w (ms): the server's, less the steps
// it took.
func (w *world) local() int64 { return w.rs.clock - w.skew }

// clone is a copy of w whose slices the caller may change (a client's took
// is replaced, never changed in place).
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
func (w *world) rank(i int) int { return w.rankOf(w.clients[i].seq) }

// rankOf is the place of a client whose seq is s among the clients the
// checker saw queue (1 is first), or 0.
func (w *world) rankOf(s int) int {
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

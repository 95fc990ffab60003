package model

import (
	"fmt"
	"strconv"
	"time"

	"github.com/leasekit/leasekit/scripts"
)

// The client's protocol, as the checker mirrors it: the commands a client
// sends, how it reads their replies, the lock's value, the queue entry and
// the grant message. Package scripts specifies, builds and reads every one
// of them (wire.go, replies.go), and this file reads them with its readers,
// as the Go client in internal/lease does (acquire.go, waiter.go, held.go):
// it knows no reply code and parses no wire string itself. It restates
// only which commands a client sends, and when.

// The lease the participants ask for, and the Go client's constants.
const (
	ttl     = 1000 // ms, every participant's lease
	recheck = 1000 // ms, the longest a waiter sleeps without asking (waiter.go)
	// drift is what the client takes off a lease for its local deadline:
	// ttl × DefaultDriftFactor (0.01) + 2 ms.
	drift = ttl/100 + 2
	// linger is how long a marked key outlives its lease, and a queue its
	// holder's ttl (scripts.Linger), ms.
	linger = int64(scripts.Linger / time.Millisecond)
	// serveOnFor bounds how long a releaser goes on serving the queue past
	// dead entries (held.go), ms.
	serveOnFor = 2000
)

// The keys of the resource the participants contend for, named as the Go
// client names them, with prefix "m:" and name "l".
var (
	lockKey    = scripts.LockKey("m:", "l")
	queueKey   = scripts.QueueKey(lockKey)
	counterKey = scripts.CounterKey(scripts.LockKey("m:", "l"))
	leaderKey  = scripts.LeaderKey(lockKey)
	permitsKey = scripts.PermitsKey("m:", "l")
	semQueue   = scripts.QueueKey(permitsKey)
)

// channel is the grant channel of a participant's Locker.
func channel(client string) string { return scripts.GrantChannel("m:", client) }

// protocol is how a participant speaks to the resource of one kind.
type protocol struct {
	kind  Kind
	limit int
	src   Scripts
}

// keys are every key the resource's scripts write: what the checker reads.
func (p protocol) keys() []string {
	switch p.kind {
	case Semaphore:
		return []string{permitsKey, semQueue}
	case Election:
		return []string{lockKey, queueKey, counterKey, leaderKey}
	}
	return []string{lockKey, queueKey, counterKey}
}

// queue is the resource's wait queue.
func (p protocol) queue() string { return p.keys()[1] }

// fenced says grants carry a token.
func (p protocol) fenced() bool { return p.kind == Correctness || p.kind == Election }

// scriptKind is the lock's kind as grant.lua names it: efficiency (a
// semaphore's too: it runs on an efficiency Locker), or fenced with the
// clock floor (the correctness default).
func (p protocol) scriptKind() string {
	if p.fenced() {
		return "c"
	}
	return "e"
}

// eval is an EVAL of src on the resource's keys (a lock's three, a
// semaphore's two: the Go client's keySet).
func (p protocol) eval(src string, args ...string) []string {
	keys := p.keys()
	if p.kind != Semaphore {
		keys = keys[:3]
	}
	return append(append([]string{"EVAL", src, strconv.Itoa(len(keys))}, keys...), args...)
}

// attempt is what an acquire's round trip found (acquire.go's found).
type attempt struct {
	granted bool
	value   string // the grant's value, without the mark
	// Not granted: the holder's remaining ms (-1: no expiry); for a
	// waiter's attempt, whether it queued the entry it sent (code 3) or
	// found its previous one queued (code 0 with a place), the entry's
	// place, and the server clock in µs.
	holderTTL    int64
	queued, kept bool
	place        string
	server       int64
	// settle says the resource is free but its queue must be served
	// first (a lease lapsed with waiters queued, or a call stopped short
	// at dead entries): the wait script settles it, at once.
	settle bool
}

// probe is an acquire's first try (acquire.once with probe set): it leaves
// settling to the wait that follows.
func (p protocol) probe(owner string) []string {
	if p.kind == Semaphore {
		return p.eval(p.src.SemAcquire, owner, strconv.Itoa(ttl), strconv.Itoa(p.limit), "0", "1")
	}
	return p.try(owner)
}

// try is a lone try's first command (acquire.once without probe).
func (p protocol) try(owner string) []string {
	switch p.kind {
	case Efficiency:
		return []string{"SET", lockKey, owner, "NX", "PX", strconv.Itoa(ttl)}
	case Semaphore:
		return p.eval(p.src.SemAcquire, owner, strconv.Itoa(ttl), strconv.Itoa(p.limit), "0")
	}
	return p.eval(p.src.FencedAcquire, owner, strconv.Itoa(ttl), p.scriptKind())
}

// readTry reads the reply of a probe or a lone try's first command; a lone
// efficiency try that SET NX did not grant reads the holder next
// (holderRead, readHolder).
func (p protocol) readTry(reply any, owner string) (attempt, error) {
	switch p.kind {
	case Efficiency:
		switch reply {
		case "OK":
			return attempt{granted: true, value: owner}, nil
		case nil:
			return attempt{holderTTL: -1}, nil
		}
	case Semaphore:
		return p.readWait(reply, owner)
	default:
		return p.readWait(reply, owner) // fenced_acquire replies as sem_acquire
	}
	return attempt{}, unexpected(reply)
}

// holderRead is a lone efficiency try's read of the holder after SET NX
// failed (acquire.setNX: GET and PTTL in one pipeline).
func (p protocol) holderRead() [][]string {
	return [][]string{{"GET", lockKey}, {"PTTL", lockKey}}
}

// readHolder reads holderRead's replies (acquire.readHolder): a marked
// value's key outlives its lease by linger, so that a lease lapsed with
// waiters queued is settled through the wait script.
func (p protocol) readHolder(get, pttl any, owner string) (attempt, error) {
	if get == nil {
		return attempt{}, nil // released in between
	}
	v, ok1 := get.(string)
	left, ok2 := pttl.(int64)
	if !ok1 || !ok2 {
		return attempt{}, unexpected([]any{get, pttl})
	}
	if left == -2 {
		return attempt{}, nil // expired within the pipeline
	}
	pv, _ := scripts.ParseValue(v, false)
	left = int64(pv.LeaseLeft(time.Duration(left)*time.Millisecond) / time.Millisecond)
	switch {
	case left == 0:
		return attempt{settle: true}, nil
	case pv.Owner == owner:
		return attempt{granted: true, value: owner}, nil
	case left < 0:
		return attempt{holderTTL: -1}, nil
	}
	return attempt{holderTTL: left}, nil
}

// settle is a lone try's call that settles a resource whose queue must be
// served first (acquire.settle): the wait script without an entry, or a
// semaphore's acquire again.
func (p protocol) settle(owner string) []string {
	if p.kind == Semaphore {
		return p.try(owner)
	}
	return p.eval(p.src.Wait, owner, strconv.Itoa(ttl), p.scriptKind(), "", "", "", "0")
}

// granted reads a grant to owner whose stored value is v (acquire.granted).
func (p protocol) granted(v, owner string) (attempt, error) {
	pv, err := scripts.ParseValue(v, p.fenced())
	if err != nil || pv.Owner != owner || pv.Queued {
		return attempt{}, fmt.Errorf("a grant to %s of value %q", owner, v)
	}
	return attempt{granted: true, value: v}, nil
}

// entry is a waiter's queue entry as the client keeps it (scripts/wire.go).
type entry struct {
	gen   int
	place string // "" until an attempt queued it
	// server is the server's clock (µs) when the latest attempt that
	// found it queued (or queued it) ran, and sent when that attempt was
	// sent, on the participant's clock (ms).
	server, sent int64
}

// entryText is generation gen of owner's entry, as the Go client builds it
// (the ticket's id is the owner id: both are the checker's).
func (p protocol) entryText(owner string, gen int) string {
	return scripts.EntryText(scripts.EntryHead(owner, ttl, p.scriptKind(), owner), gen, channel(clientName(owner)))
}

// entryID is the id of a queue entry's ticket, "" for none.
func entryID(e string) string {
	id, _, _ := scripts.EntryTicket(e)
	return id
}

// wait is a waiter's attempt (waiter.attempt, entryArgs): the entry to queue
// and the place and text of the previous one; grant channels not sharded.
func (p protocol) wait(owner string, e entry) []string {
	queue, place, prev := p.entryText(owner, e.gen), "", ""
	if e.place != "" {
		queue, place, prev = p.entryText(owner, e.gen+1), e.place, p.entryText(owner, e.gen)
	}
	if p.kind == Semaphore {
		return p.eval(p.src.SemWait, owner, strconv.Itoa(ttl), strconv.Itoa(p.limit), queue, place, prev, "0")
	}
	return p.eval(p.src.Wait, owner, strconv.Itoa(ttl), p.scriptKind(), queue, place, prev, "0")
}

// readWait reads the reply of wait.lua, sem_wait.lua or sem_acquire.lua
// (waiter.readWait) with the protocol's reader.
func (p protocol) readWait(reply any, owner string) (attempt, error) {
	at, err := scripts.ReadAttempt(reply)
	switch {
	case err != nil || p.kind == Semaphore && at.Handed != "":
		return attempt{}, unexpected(reply)
	case at.Granted():
		return p.granted(at.Value, owner)
	}
	return attempt{holderTTL: at.HolderTTL, queued: at.Code == scripts.AttemptQueued,
		kept: at.Code == scripts.AttemptWaiting && at.Place != "", place: at.Place,
		settle: at.Code == scripts.AttemptSettle, server: at.Now}, nil
}

// handedOn is the token a reply says its call handed the lock on with to
// the first live waiter ("-" for an efficiency grant), or "": a release's
// (released), else an attempt's. A semaphore's calls hand permits, which
// have no token.
func (p protocol) handedOn(reply any, released bool) string {
	if p.kind == Semaphore {
		return ""
	}
	if released {
		if e, err := scripts.ReadEnd(reply); err == nil && e.Handed {
			return e.Token
		}
	} else if at, err := scripts.ReadAttempt(reply); err == nil {
		return at.Handed
	}
	return ""
}

// release ends a grant (held.release), or, with leaving, is a waiter giving
// up (waiter.leave): it releases whatever grant of owner's Redis holds and
// takes both generations of the entry out of the queue.
func (p protocol) release(value string, leaving *entry) []string {
	if leaving == nil {
		// A Held's release leaves the mark of its grant (Core.endGrant).
		return p.endGrant(value, "0", "")
	}
	match := "0"
	owner := p.parseValue(value).owner
	first, second := p.entryText(owner, leaving.gen), p.entryText(owner, leaving.gen+1)
	if p.fenced() {
		value, match = owner+":", "1" // any token: acquire.releaseAny
	}
	return p.eval(p.releaseSrc(), value, match, first, "0", second)
}

// releaseUnmarked ends the grant stored as value exactly, leaving no mark:
// a grant that no Held was made of (late, or heard of for a waiter that
// left: acquire.release, runRelease).
func (p protocol) releaseUnmarked(value string) []string {
	return p.eval(p.releaseSrc(), value, "0", "", "0")
}

// markLife is the life of a release's mark in the model, ms: the Core's
// for go-redis's defaults is longer, which changes nothing but when the
// mark expires.
const markLife = "10000"

// endGrant ends the grant stored as value exactly, leaving its mark
// (Core.endGrant): a holder's release (match "0"), or an operator's break
// ("2", with an election's leader key after the mark, as the correctness
// Locker's Break passes it, and the break call's nonce).
func (p protocol) endGrant(value, match, nonce string) []string {
	keys := []string{lockKey, queueKey, counterKey}
	if p.kind == Semaphore {
		keys = []string{permitsKey, semQueue}
	}
	keys = append(keys, scripts.EndedKey(keys[0], value))
	if match == "2" {
		keys = append(keys, scripts.EndedKey(keys[0], "break "+nonce))
		if p.fenced() {
			keys = append(keys, leaderKey)
		}
	}
	cmd := append([]string{"EVAL", p.releaseSrc(), strconv.Itoa(len(keys))}, keys...)
	return append(cmd, value, match, "", "0", "", markLife)
}

// marks is the prefix of the marks releases leave on the resource
// (EndedKey's names): the checker reads them with the resource's keys.
func (p protocol) marks() string { return p.keys()[0] + ":ended:" }

// unqueue takes both generations of owner's entry gen out of the queue and
// ends any grant of owner's that a fenced lock holds, whatever its token
// (Held.release, after a release found lost a lease a grant message handed
// to that entry, which may have been forged while the real grant's message
// was lost: runRelease with Held.anyGrant). An unfenced grant is the owner
// id, which the release found gone: it releases nothing. As any release
// call, it serves a lapsed lease, or a vacant lock, on.
func (p protocol) unqueue(owner string, gen int) []string {
	value, match := "", "0"
	if p.fenced() {
		value, match = owner+":", "1" // any token: Held.anyGrant
	}
	return p.eval(p.releaseSrc(), value, match, p.entryText(owner, gen), "0", p.entryText(owner, gen+1))
}

func (p protocol) releaseSrc() string {
	if p.kind == Semaphore {
		return p.src.SemRelease
	}
	return p.src.Release
}

// readRelease reads a release's reply (held.release, releaseWith) with the
// protocol's reader: whether it ended a grant the caller held, and whether
// the call stopped short at dead entries, so that the caller goes on
// serving the queue (serveOn).
func (p protocol) readRelease(reply any) (held, more bool, err error) {
	e, err := scripts.ReadEnd(reply)
	// sem_release.lua replies only released, handed (a permit: no token),
	// gone, or released with dead entries ahead.
	permit := e.Lease == scripts.LeaseGone && !e.Handed && !e.ServeOn ||
		e.Lease == scripts.LeaseHeld && (!e.Handed || e.Token == "-")
	if err != nil || p.kind == Semaphore && !permit {
		return false, false, unexpected(reply)
	}
	return e.Lease == scripts.LeaseHeld, e.ServeOn, nil
}

// serveOn is a releaser's next call after a release that stopped short
// (Core.releaseWith): the release script with no value.
func (p protocol) serveOn() []string { return p.eval(p.releaseSrc(), "", "0", "", "0") }

// readServeOn says whether serveOn's reply asks for another call, as the
// release's did; anything else (an error) ends it.
func (p protocol) readServeOn(reply any) bool {
	e, err := scripts.ReadEnd(reply)
	return err == nil && e.ServeOn
}

// wire is how a client-side step here that sends more than one command,
// or whose commands the lead may change, talks to the server: send runs a
// command that may change it (whose reply may be lost, and the command
// sent again), query one that only reads.
type wire interface {
	send(op string, cmd []string) any
	query(op string, cmd []string) any
}

// broke is what the operator's Break found: whether it broke a live lease,
// whether its call stopped short at dead entries (the operator then serves
// the queue on, as a release does), and the token of the grant it handed
// the lock on with ("" for none, "-" for an efficiency grant).
type broke struct {
	broken, more bool
	handed       string
}

// breakLock is the operator's Break, every client-side step of it, as
// Core.Break does it (operate.go): a GET of the lock's grant, then one call
// of the release script that ends exactly that grant and leaves its mark
// (ARGV[2] '2', endGrant), with an election's leader key (the correctness
// Locker's Break passes it, an election's or not), read as releaseWith reads
// a release: a live lease was broken unless the reply says gone or another
// owner's.
// The moves know nothing else of Break: to change what it sends, change
// this function.
func (p protocol) breakLock(w wire, nonce string) (broke, error) {
	held, ok := w.query("GET (break)", []string{"GET", lockKey}).(string)
	if !ok {
		return broke{}, nil // nothing to break
	}
	reply := w.send("release.lua (break)", p.endGrant(scripts.Grant(held), "2", nonce))
	broken, more, err := p.readRelease(reply)
	return broke{broken: broken, more: more, handed: p.handedOn(reply, true)}, err
}

// refresh restarts a grant's ttl (held.refresh); an election's leader keeps
// its leader key alive with it (KEYS[3], lock.refresh).
func (p protocol) refresh(value string, leader bool) []string {
	switch {
	case p.kind == Semaphore:
		return p.eval(p.src.SemRefresh, value, strconv.Itoa(ttl))
	case leader:
		return []string{"EVAL", p.src.Refresh, "3", lockKey, counterKey, leaderKey, value, strconv.Itoa(ttl), ""}
	}
	return []string{"EVAL", p.src.Refresh, "1", lockKey, value, strconv.Itoa(ttl)}
}

// readRefresh reads a refresh's reply with the protocol's reader: held,
// and, for a leader, whether the leader key lacks the grant (the leader
// writes it back: restore).
func (p protocol) readRefresh(reply any, leader bool) (held, restore bool, err error) {
	r, err := scripts.ReadRefresh(reply)
	if err != nil || r.LeaderLost && !leader {
		return false, false, unexpected(reply)
	}
	return r.Lease == scripts.LeaseHeld, r.LeaderLost, nil
}

// stamp stores the grant stamped in place of value, the grant Redis made
// the caller, and restarts its lease (acquire.stamped): the refresh script
// with ARGV[4], on the lock's key, its fence counter and the stamp's mark,
// the counter not expiring (a correctness lock's default). Sent again after
// a lost reply, it finds stamped stored, and the mark, and counts it the
// caller's.
func (p protocol) stamp(value, stamped string) []string {
	return []string{"EVAL", p.src.Refresh, "3", lockKey, counterKey, scripts.StampKey(lockKey, stamped), value, strconv.Itoa(ttl), "", stamped}
}

// readStamp reads a stamp's reply with the protocol's reader
// (scripts.ReadRefresh): whether the lease was held, and stamped.
func (p protocol) readStamp(reply any) (bool, error) {
	r, err := scripts.ReadRefresh(reply)
	if err != nil || r.LeaderLost {
		return false, unexpected(reply)
	}
	return r.Lease == scripts.LeaseHeld, nil
}

// lockValue is a lock's value, parsed (scripts.Value): owner [":"
// token] ["*" [expiry]]. A semaphore's permit is its owner id.
type lockValue struct {
	owner, token string // token: "" unfenced
	marked       bool
	expiry       int64 // the lease's expiry the mark records, ms; -1: none
}

// parseValue parses a lock's value.
func (p protocol) parseValue(v string) lockValue {
	pv, _ := scripts.ParseValue(v, p.fenced()) // the vacant value has no token
	lv := lockValue{owner: pv.Owner, marked: pv.Queued, expiry: pv.Expiry}
	if pv.Token != 0 {
		lv.token = strconv.FormatUint(pv.Token, 10)
	}
	return lv
}

// lapsed says whether the lease v records has lapsed by clock (ms): its
// mark's expiry has come; the vacant value "*0" has.
func (v lockValue) lapsed(clock int64) bool { return v.marked && v.expiry >= 0 && v.expiry <= clock }

// grant is a live grant on the server: its owner id and, fenced, its token.
type grant struct{ owner, token string }

func (g grant) String() string {
	if g.token == "" {
		return g.owner
	}
	return g.owner + ":" + g.token
}

// lease is st's lock value and whether it holds a live lease; nil when the
// lock holds no value (or another type).
func (p protocol) lease(st redisState) (lockValue, string, bool) {
	k := st.key(lockKey)
	if k == nil || k.typ != "string" {
		return lockValue{}, "", false
	}
	v := p.parseValue(k.items[0])
	return v, scripts.Grant(k.items[0]), !v.lapsed(st.clock)
}

// holders are the live grants st holds: the lock's holder whose lease has
// not lapsed, or the semaphore's permits that have not expired (scored by
// expiry, in ms).
func (p protocol) holders(st redisState) []grant {
	if p.kind == Semaphore {
		var gs []grant
		z := st.key(permitsKey)
		for i := 0; z != nil && i+1 < len(z.items); i += 2 {
			if expiry, err := strconv.ParseFloat(z.items[i+1], 64); err == nil && int64(expiry) > st.clock {
				gs = append(gs, grant{owner: z.items[i]})
			}
		}
		return gs
	}
	if v, _, live := p.lease(st); live {
		return []grant{{v.owner, v.token}}
	}
	return nil
}

// heldAs says whether st holds a live grant stored as value: the lock's
// value, with or without the mark, while its lease lasts; a semaphore's
// live permit of that owner.
func (p protocol) heldAs(st redisState, value string) bool {
	if p.kind != Semaphore {
		_, bare, live := p.lease(st)
		return live && bare == value
	}
	for _, g := range p.holders(st) {
		if g.owner == value {
			return true
		}
	}
	return false
}

// free says whether st has room for a grant: the lock holds no live lease,
// or fewer permits than the limit are live.
func (p protocol) free(st redisState) bool {
	if p.kind == Semaphore {
		return len(p.holders(st)) < p.limit
	}
	return len(p.holders(st)) == 0
}

// grantMsg is a grant message, parsed: ticket SP token SP seconds SP micros
// [SP limit].
type grantMsg struct {
	id    string
	gen   int
	token string // "-" for an efficiency grant
	at    int64  // µs, the server clock at the grant
	limit int
}

// parseGrant parses a grant message with the protocol's reader (as
// waiter.handed does); ok is false for one that is no grant.
func parseGrant(msg string) (grantMsg, bool) {
	m, ok := scripts.ParseMessage(msg)
	return grantMsg{id: m.ID, gen: m.Gen, token: m.Token, at: m.At, limit: m.Limit}, ok
}

// accepts says whether a waiter whose entry is e takes m as its grant
// (waiter.handed): a grant to its current generation, made after its latest
// attempt.
func (m grantMsg) accepts(e entry) bool { return m.gen == e.gen && m.at >= e.server }

// start is when the grant m began on the participant's clock, now being
// its clock as it reads m (message.start): its entry's latest attempt was
// sent at e.sent and ran at e.server on the server's clock, and the grant
// came m.at - e.server later; a wait longer than the participant's own, or
// below zero, says the server's clock stepped, and only the send time is
// sure.
func (m grantMsg) start(e entry, now int64) int64 {
	waited := m.at/1000 - e.server/1000
	if m.at < e.server || waited > now-e.sent {
		return e.sent
	}
	return e.sent + waited
}

// value is what the grant m reports stored for owner.
func (m grantMsg) value(owner string) string { return scripts.Message{Token: m.token}.Value(owner) }

// took is what a Locker remembers of an acquire that left with a grant a
// message handed it (strays.go's took): the acquire (its cycle) and the
// value it took.
type took struct {
	cycle int
	value string
}

// passOn says whether a Locker that remembers t releases the grant a later
// message m names for owner (strays.heard), and by which value (exactly):
// unless it is the grant owner holds (the same message again, or an
// efficiency grant a forged message announced early), and its lease is not
// over.
func (m grantMsg) passOn(owner string, t took, over bool) (string, bool) {
	v := m.value(owner)
	return v, v != t.value || over
}

// forged is a grant message nobody granted, for the current entry of a
// waiter, made now (µs): what anyone who reads the queue could publish.
func (p protocol) forged(owner string, gen int, now int64) string {
	m := scripts.Message{ID: owner, Gen: gen, Token: "-", At: now}
	if p.fenced() {
		m.Token = "7"
	}
	if p.kind == Semaphore {
		m.Limit = p.limit
	}
	return m.String()
}

// unexpected is the error for a reply the client cannot read.
func unexpected(reply any) error { return fmt.Errorf("unexpected reply %v", show(reply)) }

// now is the server clock in µs that a script reads in w: the clock's ms
// and one µs, or, if later, one µs past every reading of it that w still
// holds (a place in the queue or a waiter's, a waiter's latest attempt, a
// grant in flight). The checker's clock stands still between its moves, a
// real one does not: no two scripts read the same µs, so a waiter that
// queued after another never gets an equal place. (Tokens are left out:
// two grants within one µs of the clock, the second counting on from the
// first, are what a real server does.) A reading past the clock's ms was
// taken before the clock stepped back, and is left out.
func (p protocol) now(w *world) int64 {
	us := w.rs.clock*1000 + 1
	later := func(v int64) {
		if v < (w.rs.clock+1)*1000 {
			us = max(us, v+1)
		}
	}
	if q := w.rs.key(p.queue()); q != nil {
		for i := 1; i < len(q.items); i += 2 {
			f, _ := strconv.ParseFloat(q.items[i], 64)
			later(int64(f))
		}
	}
	for i := range w.clients {
		place, _ := strconv.ParseInt(w.clients[i].e.place, 10, 64)
		later(place)
		later(w.clients[i].e.server)
	}
	for _, m := range w.flight {
		if g, ok := parseGrant(m.text); ok {
			later(g.at)
		}
	}
	return us
}

// ticketID is the id a message's ticket names, which the participant's
// Locker routes it by (notify).
func ticketID(msg string) string { return scripts.TicketID(msg) }

// deadlines are the times after st's clock when the resource changes on
// its own besides a key's expiry: a lock's lease lapses at the expiry its
// mark records (the key lingers), a semaphore's permits expire by score.
func (p protocol) deadlines(st redisState) []int64 {
	if p.kind != Semaphore {
		if v, _, live := p.lease(st); live && v.expiry >= 0 {
			return []int64{v.expiry}
		}
		return nil
	}
	var ts []int64
	if z := st.key(permitsKey); z != nil {
		for i := 1; i < len(z.items); i += 2 {
			// The header is scored below 0 (scripts/wire.go): no permit's.
			if f, err := strconv.ParseFloat(z.items[i], 64); err == nil && f >= 0 {
				ts = append(ts, int64(f))
			}
		}
	}
	return ts
}

// The names of the operations, for traces.
func (p protocol) probeName() string {
	return [...]string{"SET NX PX", "fenced_acquire.lua", "sem_acquire.lua", "fenced_acquire.lua"}[p.kind]
}

func (p protocol) settleName() string { return p.pick("wait.lua (settle)", "sem_acquire.lua (settle)") }

func (p protocol) waitName() string { return p.pick("wait.lua", "sem_wait.lua") }

func (p protocol) releaseName() string { return p.pick("release.lua", "sem_release.lua") }

func (p protocol) refreshName() string { return p.pick("refresh.lua", "sem_refresh.lua") }

func (p protocol) pick(lock, sem string) string {
	if p.kind == Semaphore {
		return sem
	}
	return lock
}

// The election (internal/lease/election.go): its leader key beside the lock, a
// hash of the grant that took office and its value; its channel is the leader
// key's name.

// announce is a candidate holding the grant stored as value taking office
// (election.announce), or a leader writing its leader key back (lead's
// restore), with its owner id as the leader's value.
func (p protocol) announce(value string) []string {
	return []string{"EVAL", p.src.ElectionAnnounce, "2", lockKey, leaderKey, value, p.parseValue(value).owner, leaderKey}
}

// readAnnounce reads announce's reply: whether the candidate took office.
func (p protocol) readAnnounce(reply any) (bool, error) {
	done, err := scripts.ReadDone(reply)
	if err != nil {
		return false, unexpected(reply)
	}
	return done, nil
}

// resign is a leader whose grant (value) ended clearing its leader key
// (election.resign).
func (p protocol) resign(value string) []string {
	return []string{"EVAL", p.src.ElectionResign, "2", lockKey, leaderKey, value, leaderKey}
}

// readLeader is Leader's one read (election.read), with the leader's value.
func (p protocol) readLeader() []string {
	return []string{"EVAL", p.src.ElectionLeader, "2", lockKey, leaderKey, "1"}
}

// parseLeader reads readLeader's reply with the protocol's reader
// (election.read). It returns the leader's term and value, "" for none.
func (p protocol) parseLeader(reply any) (string, error) {
	s, err := scripts.ReadLeader(reply, true)
	switch {
	case err != nil:
		return "", unexpected(reply)
	case s.Office != scripts.OfficeLeading:
		return "", nil
	}
	return strconv.FormatUint(s.Term, 10) + " " + s.Value, nil
}

// leader is the leader st holds: the lock's live grant, when the leader key
// names it, by its term and the leader's value; "" for none.
func (p protocol) leader(st redisState) string {
	v, bare, live := p.lease(st)
	l := st.key(leaderKey)
	if !live || l == nil || l.typ != "hash" || hashField(l, "grant") != bare {
		return ""
	}
	return v.token + " " + hashField(l, "value")
}

// hashField is field f of hash key k, or "".
func hashField(k *rkey, f string) string {
	for i := 0; i+1 < len(k.items); i += 2 {
		if k.items[i] == f {
			return k.items[i+1]
		}
	}
	return ""
}

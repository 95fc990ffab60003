// Package notify turns lock releases into wake-ups for local waiters.
//
// A Notifier serves every channel one Locker waits on, over as few Redis
// subscription connections as the deployment allows (conn.go): one on a
// single server; in Redis Cluster, one for the plain channels (PUBLISH there
// reaches every node over the cluster bus) and one per hash slot for the
// sharded ones, which live on the slot's master; on a Ring, one per shard
// key, since a PUBLISH reaches only the shard it ran on.
//
// A channel carries two kinds of message. An empty one is a wake-up: the
// Notifier wakes the first waiter on the channel that has no wake-up pending,
// one waiter per release, in arrival order. Any other is a grant, whose
// first field is a ticket, "id" or "id.n": the waiter that joined with that
// id alone is woken, and reads it with Grant. A grant for no waiter goes to
// the Notifier's stray function.
//
// A watched channel (Watch) carries hints that something changed, such as
// an election's notices: every message, and a resubscription after a
// reconnect, wakes every watcher of the channel, which reads the truth from
// the keys. It is subscribed while it has watchers.
//
// A connection that serves waiters or watchers is health-checked
// (health.go): one that has gone silent while the server answers others, as
// a half-open one does, is replaced, and its waiters are woken to ask Redis
// again, as after a reconnect.
//
// A lock's wake-up channel is subscribed while it has waiters. A grant
// channel (one whose waiters have ids) stays subscribed once subscribed, so
// that every later wait is spared the SUBSCRIBE round trip and waiters queue
// the same number of round trips after they arrive, which keeps arrival
// order. On a single server a Locker has one grant channel, kept until Close;
// in a cluster it has one per lock, and at most maxIdle of them are kept
// without waiters.
package notify

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/scripts"
)

// ErrClosed is returned to waiters when the Notifier is closed under them.
var ErrClosed = errors.New("notify: closed")

// confirmWait bounds how long Join waits for the server to confirm a
// subscription. A connection that died silently never confirms; past this the
// waiter goes on unconfirmed, and the holder's ttl still bounds its wait.
const confirmWait = time.Second

// maxIdle is how many sharded grant channels without waiters a Notifier keeps
// subscribed; past it, the one idle longest is unsubscribed.
const maxIdle = 32

// Notifier serves wake-ups for every lock one Locker waits on.
type Notifier struct {
	sub   port.Subscriber
	stray func(msg string) // gets the grants for no waiter

	// send orders SUBSCRIBE and UNSUBSCRIBE of a channel with the counts
	// below, so that a confirmation can be matched to the request it answers.
	send sync.Mutex

	mu     sync.Mutex
	conns  map[string]*conn       // by connection key (conn.go)
	subs   map[string]*channelSub // channels with waiters, and kept ones
	counts map[string]*counts
	// unsubs counts the sharded UNSUBSCRIBEs sent per channel and not yet
	// confirmed: a confirmation beyond them is the server's own, sent when
	// the channel's slot moved away (conn.go).
	unsubs map[string]int
	idle   int // kept sharded channels without waiters
	closed bool
	done   chan struct{} // closed by Close
	// ctx is cancelled by Close: it ends the health check's probes.
	ctx    context.Context
	cancel context.CancelFunc
	loops  sync.WaitGroup
}

// counts are the SUBSCRIBE requests sent for a channel and the confirmations
// received, over every subscription the channel has had. Redis confirms
// every SUBSCRIBE, even of a channel subscribed already, in order, so the
// n-th confirmation answers the n-th request: a new channelSub waits for
// the one numbered need = sent, and confirmations of earlier requests (of a
// subscription since dropped and made again) do not ready it. A reconnect
// resubscribes on its own and resets the count (see reconnected).
type counts struct {
	sent, acked int
}

// channelSub is one subscription of a channel, from the SUBSCRIBE that Join
// sends for its first waiter until the UNSUBSCRIBE of its last (or Close, for
// a kept one). Its states, under Notifier.mu:
//
//   - pending: in subs, ready open, confirmed false. Join sent SUBSCRIBE and
//     its waiters wait on ready (at most confirmWait).
//   - live: in subs, ready closed, confirmed true, err nil. Messages on the
//     channel wake its waiters (every one on a reconnect).
//   - failed: out of subs, ready closed, err set. Its waiters get err from
//     Join; the next Join of the channel makes a new channelSub.
//   - gone: out of subs once its last waiter leaves (for a kept one: Close,
//     or eviction past maxIdle), and UNSUBSCRIBE sent.
//
// A channelSub never goes back to pending; a channel that is subscribed
// again gets a new one.
type channelSub struct {
	channel   string
	conn      *conn
	need      int           // the confirmation count that answers this SUBSCRIBE
	ready     chan struct{} // closed when the subscription is confirmed or failed
	confirmed bool
	err       error     // why the subscription failed, once ready is closed
	kept      bool      // a grant channel: subscribed, waiters or not
	watched   bool      // every message wakes every waiter (Watch)
	idleSince time.Time // when a kept sharded one lost its last waiter
	waiters   []*Waiter
}

// New returns a Notifier that subscribes through sub, and passes every
// grant message that names no waiter to stray (nil: dropped), on its receive
// loop: stray must not block. No connection is opened until the first Join.
func New(sub port.Subscriber, stray func(msg string)) *Notifier {
	if stray == nil {
		stray = func(string) {}
	}
	n := &Notifier{
		sub:    sub,
		stray:  stray,
		conns:  make(map[string]*conn),
		subs:   make(map[string]*channelSub),
		counts: make(map[string]*counts),
		unsubs: make(map[string]int),
		done:   make(chan struct{}),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

// Waiter is one goroutine's place in the queue of a channel.
type Waiter struct {
	n       *Notifier
	channel string
	id      string
	sub     *channelSub
	wake    chan struct{}
	grants  []string // the grant messages for id not taken yet, oldest first; under n.mu
}

// Wake returns the channel that receives this waiter's wake-ups.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

// Channel is the channel the waiter joined.
func (w *Waiter) Channel() string { return w.channel }

// Done returns a channel closed when the Notifier is closed.
func (w *Waiter) Done() <-chan struct{} { return w.n.done }

// Join queues a waiter on channel and returns once the server has confirmed
// the subscription, so that every release published after Join returns
// reaches the waiter; or, if no confirmation comes within confirmWait (a
// connection that died silently), unconfirmed, and then only the holder's
// ttl bounds the wait. Grants on the channel for id go to this waiter; in
// Redis Cluster a channel with ids is a sharded one (SSUBSCRIBE), which must
// hash to the slot of the lock it serves. The caller must call Leave.
func (n *Notifier) Join(ctx context.Context, channel, id string) (*Waiter, error) {
	return n.join(ctx, channel, id, false)
}

// Subscribed reports whether channel is subscribed, or being subscribed: a
// Join of it then sends no SUBSCRIBE of its own.
func (n *Notifier) Subscribed(channel string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.subs[channel]
	return ok
}

// Watch subscribes a watcher to channel, as Join does a waiter, for hints:
// every message on the channel, whatever it says, and every resubscription
// after a reconnect (messages may have been lost meanwhile) wakes every
// watcher of the channel. The caller must call Leave.
func (n *Notifier) Watch(ctx context.Context, channel string) (*Waiter, error) {
	return n.join(ctx, channel, "", true)
}

func (n *Notifier) join(ctx context.Context, channel, id string, watched bool) (*Waiter, error) {
	n.send.Lock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		n.send.Unlock()
		return nil, ErrClosed
	}
	sub, ok := n.subs[channel]
	var fresh *conn
	if !ok {
		c := n.counts[channel]
		if c == nil {
			c = &counts{}
			n.counts[channel] = c
		}
		c.sent++
		cn := n.conns[n.connKey(channel, id)]
		if cn == nil {
			cn = n.open(n.connKey(channel, id), channel)
			fresh = cn
		}
		sub = &channelSub{channel: channel, conn: cn, need: c.sent, ready: make(chan struct{}), kept: id != "", watched: watched}
		cn.channels++
		n.subs[channel] = sub
	} else if sub.kept && len(sub.waiters) == 0 && sub.conn.sharded {
		n.idle--
	}
	w := &Waiter{n: n, channel: channel, id: id, sub: sub, wake: make(chan struct{}, 1)}
	sub.waiters = append(sub.waiters, w)
	n.mu.Unlock()
	var err error
	if fresh != nil && fresh.sharded && !n.locate(channel) {
		err = ErrClosed
	} else if !ok {
		// Not the caller's deadline: go-redis puts it on the socket write
		// of the shared connection, and a write that times out makes it
		// reconnect that connection under every waiter.
		err = sub.conn.subscribe(context.WithoutCancel(ctx), channel)
	}
	if fresh != nil {
		n.run(fresh) // after the first SUBSCRIBE, which picks the node
	}
	n.send.Unlock()
	if err != nil {
		n.fail(sub, err)
	}
	return w, w.confirmed(ctx)
}

// confirmed waits for the waiter's subscription to be confirmed, at most
// confirmWait; it leaves and returns why when it fails.
func (w *Waiter) confirmed(ctx context.Context) error {
	t := time.NewTimer(confirmWait)
	defer t.Stop()
	var err error
	select {
	case <-w.sub.ready:
		err = w.sub.err
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	case <-w.n.done:
		err = ErrClosed
	}
	if err != nil {
		w.Leave()
	}
	return err
}

// Grant takes the oldest grant message received for the waiter's id and
// not taken yet, if any. Another left behind it gets a wake-up of its own:
// no message is ever dropped for a later one (a forged message must not
// hide the real grant).
func (w *Waiter) Grant() (string, bool) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if len(w.grants) == 0 {
		return "", false
	}
	g := w.grants[0]
	w.grants = w.grants[1:]
	if len(w.grants) > 0 {
		w.signal()
	}
	return g, true
}

// PassWake hands back a wake-up the waiter took but could not use (its retry
// failed, or it gave up), so that Leave passes it to the next waiter.
func (w *Waiter) PassWake() { w.signal() }

// signal gives the waiter a wake-up unless it has one pending, and reports
// whether it did.
func (w *Waiter) signal() bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// fail ends a subscription that could not be made: its waiters get err, and
// the next Join for the channel tries again.
func (n *Notifier) fail(sub *channelSub, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failLocked(sub, err)
}

// failLocked is fail, with n.mu held.
func (n *Notifier) failLocked(sub *channelSub, err error) {
	if n.subs[sub.channel] == sub {
		delete(n.subs, sub.channel)
	}
	if n.closed {
		err = ErrClosed
	}
	if !sub.confirmed {
		sub.confirmed = true
		sub.err = err
		close(sub.ready)
	}
}

// Leave removes the waiter from its channel, passes on a wake-up it received
// but did not act on (so no release is lost), and unsubscribes the channel
// when it was the last waiter and the channel is not kept. It returns the
// grant messages received for the waiter and not taken, if any.
func (w *Waiter) Leave() (grants []string) {
	n := w.n
	n.send.Lock()
	defer n.send.Unlock()
	n.mu.Lock()
	grants = w.unqueue()
	gone := n.release(w.sub)
	closing := n.dropAll(gone)
	closed := n.closed
	n.mu.Unlock()
	if !closed {
		n.unsubscribe(gone, closing)
	}
	for _, cn := range closing {
		_ = cn.ps.Close()
	}
	return grants
}

// unqueue takes w out of its channel's waiters, passes on its pending
// wake-up, and returns its untaken grants. Called with n.mu held.
func (w *Waiter) unqueue() []string {
	sub := w.sub
	for i, other := range sub.waiters {
		if other == w {
			sub.waiters = append(sub.waiters[:i], sub.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.wake:
		sub.wakeOne()
	default:
	}
	grants := w.grants
	w.grants = nil
	return grants
}

// release returns the subscriptions to drop now that sub may have lost its
// last waiter: sub itself, unless it is kept (a grant channel) or another
// subscription of its channel took its place; and, past maxIdle kept sharded
// channels without waiters, the one idle longest. Called with n.mu held.
func (n *Notifier) release(sub *channelSub) []*channelSub {
	if len(sub.waiters) > 0 {
		return nil
	}
	owned := n.subs[sub.channel] == sub
	var gone []*channelSub
	// A failed subscription is no longer in subs; it is still the last user
	// of its channel unless a new one has taken its place.
	if owned && !sub.kept || sub.err != nil && n.subs[sub.channel] == nil {
		gone = append(gone, sub)
	}
	if owned && sub.kept && sub.conn.sharded {
		sub.idleSince = time.Now()
		if n.idle++; n.idle > maxIdle {
			gone = append(gone, n.evict())
		}
	}
	return gone
}

// dropAll forgets the subscriptions gone, and returns the connections left
// serving no channel, to be closed. Called with n.mu held.
func (n *Notifier) dropAll(gone []*channelSub) []*conn {
	var closing []*conn
	for _, s := range gone {
		if cn := n.drop(s); cn != nil {
			closing = append(closing, cn)
		}
	}
	return closing
}

// unsubscribe sends UNSUBSCRIBE for the subscriptions gone whose connection
// stays open: even after a failed SUBSCRIBE, since go-redis records the
// channel anyway and would subscribe it again on every reconnect.
func (n *Notifier) unsubscribe(gone []*channelSub, closing []*conn) {
	for _, s := range gone {
		if !slices.Contains(closing, s.conn) {
			_ = s.conn.unsubscribe(context.Background(), s.channel)
		}
	}
}

// evict takes the kept sharded channel idle longest out of the idle count
// and returns it. Called with n.mu held, with n.idle > 0.
func (n *Notifier) evict() *channelSub {
	var oldest *channelSub
	for _, s := range n.subs {
		if s.kept && s.conn.sharded && len(s.waiters) == 0 && (oldest == nil || s.idleSince.Before(oldest.idleSince)) {
			oldest = s
		}
	}
	n.idle--
	return oldest
}

// drop forgets the subscription of a channel whose last waiter left, and
// returns its connection when it serves no other channel and is to be
// closed (a per-slot or per-shard one). Called with n.mu held.
func (n *Notifier) drop(sub *channelSub) *conn {
	if n.subs[sub.channel] == sub {
		delete(n.subs, sub.channel)
		if c := n.counts[sub.channel]; c != nil && c.acked >= c.sent {
			delete(n.counts, sub.channel)
		}
	}
	cn := sub.conn
	if cn.channels--; cn.channels > 0 || cn.key == plainKey || n.conns[cn.key] != cn {
		if cn.sharded {
			n.unsubs[sub.channel]++
		}
		return nil
	}
	delete(n.conns, cn.key)
	return cn
}

// wakeOne signals the first waiter with no wake-up pending. Called with n.mu
// held.
func (s *channelSub) wakeOne() {
	for _, w := range s.waiters {
		if w.signal() {
			return
		}
	}
}

// signalAll gives every waiter a wake-up, so that each checks its lock again.
// Called with n.mu held.
func (s *channelSub) signalAll() {
	for _, w := range s.waiters {
		w.signal()
	}
}

// granted hands a grant message to the waiter whose id its ticket names,
// and reports whether there was one. Called with n.mu held.
func (s *channelSub) granted(msg string) bool {
	id := scripts.TicketID(msg)
	for _, w := range s.waiters {
		if w.id != "" && w.id == id {
			w.grants = append(w.grants, msg)
			w.signal()
			return true
		}
	}
	return false
}

// Close ends every subscription and releases every waiter with ErrClosed. It
// waits for the receive loops to end.
func (n *Notifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.done)
	n.cancel()
	conns := make([]*conn, 0, len(n.conns))
	for _, cn := range n.conns {
		conns = append(conns, cn)
	}
	clear(n.conns)
	n.mu.Unlock()
	var errs []error
	for _, cn := range conns {
		errs = append(errs, cn.ps.Close())
	}
	n.loops.Wait()
	return errors.Join(errs...)
}

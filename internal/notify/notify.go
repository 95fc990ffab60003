// Package notify turns lock releases into wake-ups for local waiters.
//
// A Notifier owns one Redis subscription connection, shared by every key a
// Locker waits on. In Redis Cluster that one connection serves keys of every
// shard: releases publish with plain PUBLISH, which the cluster bus carries to
// every node.
//
// A channel carries two kinds of message. An empty one is a wake-up: the
// Notifier wakes the first waiter on the channel that has no wake-up pending,
// one waiter per release, in arrival order, so a release does not stampede
// every local waiter into Redis. Any other is a grant, "ticket ...", whose
// first field is the ticket (a random id) of the waiter the lock was handed
// to: that waiter alone is woken, and reads it with Grant.
//
// A lock's wake-up channel is subscribed while it has waiters and
// unsubscribed when the last one leaves, so an uncontended lock's releases
// never come back to the process that made them. A grant channel (one whose
// waiters have tickets: a Locker's own) stays subscribed, once subscribed,
// until Close: its messages name one waiter each, so keeping it costs an idle
// subscription, not traffic, and it spares every later wait the SUBSCRIBE
// round trip, so that every waiter queues the same number of round trips
// after it arrives, which keeps arrival order.
package notify

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned to waiters when the Notifier is closed under them.
var ErrClosed = errors.New("notify: closed")

// confirmWait bounds how long Join waits for the server to confirm a
// subscription. A connection that died silently never confirms; past this the
// waiter goes on unconfirmed, and the holder's ttl still bounds its wait.
const confirmWait = time.Second

// Notifier serves wake-ups for every lock one Locker waits on.
type Notifier struct {
	client redis.UniversalClient

	// send orders SUBSCRIBE and UNSUBSCRIBE of a channel with the counts
	// below, so that a confirmation can be matched to the request it answers.
	send sync.Mutex

	mu     sync.Mutex
	ps     *redis.PubSub
	subs   map[string]*channelSub // channels with waiters
	counts map[string]*counts
	closed bool
	done   chan struct{} // closed by Close
	loop   chan struct{} // closed when the receive loop has ended
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
//   - gone: out of subs once its last waiter leaves (never, while the
//     Notifier lives, for a kept one), and UNSUBSCRIBE sent.
//
// A channelSub never goes back to pending; a channel that is subscribed
// again gets a new one.
type channelSub struct {
	need      int           // the confirmation count that answers this SUBSCRIBE
	ready     chan struct{} // closed when the subscription is confirmed or failed
	confirmed bool
	err       error // why the subscription failed, once ready is closed
	kept      bool  // a grant channel: subscribed until Close, waiters or not
	waiters   []*Waiter
}

// New returns a Notifier that subscribes through client. No connection is
// opened until the first Join.
func New(client redis.UniversalClient) *Notifier {
	return &Notifier{
		client: client,
		subs:   make(map[string]*channelSub),
		counts: make(map[string]*counts),
		done:   make(chan struct{}),
	}
}

// Waiter is one goroutine's place in the queue of a channel.
type Waiter struct {
	n       *Notifier
	channel string
	ticket  string
	sub     *channelSub
	wake    chan struct{}
	grant   string // the last grant message for ticket, until taken; under n.mu
}

// Wake returns the channel that receives this waiter's wake-ups.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

// Done returns a channel closed when the Notifier is closed.
func (w *Waiter) Done() <-chan struct{} { return w.n.done }

// Join queues a waiter on channel and returns once the server has confirmed the
// subscription, so that every release published after Join returns reaches the
// waiter; or, if no confirmation comes within confirmWait (a connection that
// died silently), unconfirmed, and then only the holder's ttl bounds the wait. Grants on the channel for ticket go to this waiter. The caller must
// call Leave.
func (n *Notifier) Join(ctx context.Context, channel, ticket string) (*Waiter, error) {
	n.send.Lock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		n.send.Unlock()
		return nil, ErrClosed
	}
	if n.ps == nil {
		n.start()
	}
	sub, ok := n.subs[channel]
	if !ok {
		c := n.counts[channel]
		if c == nil {
			c = &counts{}
			n.counts[channel] = c
		}
		c.sent++
		sub = &channelSub{need: c.sent, ready: make(chan struct{}), kept: ticket != ""}
		n.subs[channel] = sub
	}
	w := &Waiter{n: n, channel: channel, ticket: ticket, sub: sub, wake: make(chan struct{}, 1)}
	sub.waiters = append(sub.waiters, w)
	ps := n.ps
	n.mu.Unlock()
	var err error
	if !ok {
		// Not the caller's deadline: go-redis puts it on the socket write
		// of the shared connection, and a write that times out makes it
		// reconnect that connection under every waiter.
		err = ps.Subscribe(context.WithoutCancel(ctx), channel)
	}
	n.send.Unlock()
	if err != nil {
		n.fail(channel, sub, err)
	}

	t := time.NewTimer(confirmWait)
	defer t.Stop()
	select {
	case <-sub.ready:
		if sub.err != nil {
			w.Leave()
			return nil, sub.err
		}
		return w, nil
	case <-t.C:
		return w, nil
	case <-ctx.Done():
		w.Leave()
		return nil, ctx.Err()
	case <-n.done:
		w.Leave()
		return nil, ErrClosed
	}
}

// Grant takes the grant message received for the waiter's ticket since the
// last call, if any.
func (w *Waiter) Grant() (string, bool) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	g := w.grant
	w.grant = ""
	return g, g != ""
}

// Unused hands back a wake-up the waiter took but could not use (its retry
// failed, or it gave up), so that Leave passes it to the next waiter.
func (w *Waiter) Unused() { w.signal() }

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

// fail ends a subscription that could not be made: its waiters get err, and the
// next Join for the channel tries again.
func (n *Notifier) fail(channel string, sub *channelSub, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs[channel] == sub {
		delete(n.subs, channel)
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

// Leave removes the waiter from its queue, and unsubscribes the channel when
// it was the last. A wake-up it received but did not act on passes to the next
// waiter, so no release is lost.
func (w *Waiter) Leave() {
	n := w.n
	n.send.Lock()
	defer n.send.Unlock()
	n.mu.Lock()
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
	owned := n.subs[w.channel] == sub
	// A failed subscription is no longer in subs; it is still the last user
	// of the channel unless a new one has taken its place. A kept one that
	// stands is never the last.
	last := len(sub.waiters) == 0 && (owned && !sub.kept || sub.err != nil && n.subs[w.channel] == nil)
	if last && owned {
		delete(n.subs, w.channel)
		if c := n.counts[w.channel]; c != nil && c.acked >= c.sent {
			delete(n.counts, w.channel)
		}
	}
	ps, closed := n.ps, n.closed
	n.mu.Unlock()
	// Even after a failed SUBSCRIBE: go-redis records the channel anyway,
	// and would subscribe it again on every reconnect.
	if last && !closed {
		_ = ps.Unsubscribe(context.Background(), w.channel)
	}
}

// wakeOne signals the first waiter with no wake-up pending. Called with n.mu held.
func (s *channelSub) wakeOne() {
	for _, w := range s.waiters {
		if w.signal() {
			return
		}
	}
}

// granted hands a grant message to the waiter whose ticket it names. A grant
// for a ticket no longer waiting is dropped: that waiter's leaving released
// it. Called with n.mu held.
func (s *channelSub) granted(msg string) {
	ticket, _, _ := strings.Cut(msg, " ")
	for _, w := range s.waiters {
		if w.ticket != "" && w.ticket == ticket {
			w.grant = msg
			w.signal()
			return
		}
	}
}

// start opens the subscription and its receive loop. Called with n.mu held.
func (n *Notifier) start() {
	n.ps = n.client.Subscribe(context.Background())
	n.loop = make(chan struct{})
	go n.receive(n.ps)
}

func (n *Notifier) receive(ps *redis.PubSub) {
	defer close(n.loop)
	backoff := time.Duration(0)
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			select {
			case <-n.done:
				return
			default:
			}
			n.reconnected()
			backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
			select {
			case <-n.done:
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirm(m.Channel)
			}
		case *redis.Message:
			n.mu.Lock()
			if sub := n.subs[m.Channel]; sub != nil {
				if m.Payload == "" {
					sub.wakeOne()
				} else {
					sub.granted(m.Payload)
				}
			}
			n.mu.Unlock()
		}
	}
}

// reconnected handles a dropped subscription connection, which go-redis
// re-dials and resubscribes: messages published meanwhile are lost, so every
// waiter checks its lock again, and the confirmations counted so far no
// longer match the requests, so every subscription counts as confirmed.
func (n *Notifier) reconnected() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.counts)
	for _, sub := range n.subs {
		if !sub.confirmed {
			sub.confirmed = true
			close(sub.ready)
		}
		for _, w := range sub.waiters {
			w.signal()
		}
	}
}

// confirm counts a subscription confirmation and readies the subscription it
// answers.
func (n *Notifier) confirm(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.counts[channel]
	if c == nil {
		// A resubscription after a reconnect: the server may have lost the
		// lock's queue meanwhile (a restart, a failover), so every waiter
		// on the channel checks its lock again, now that it can be reached.
		if sub := n.subs[channel]; sub != nil {
			for _, w := range sub.waiters {
				w.signal()
			}
		}
		return
	}
	c.acked++
	if sub := n.subs[channel]; sub != nil && !sub.confirmed && c.acked >= sub.need {
		sub.confirmed = true
		close(sub.ready)
	}
	if n.subs[channel] == nil && c.acked >= c.sent {
		delete(n.counts, channel)
	}
}

// Close ends the subscription and releases every waiter with ErrClosed. It
// waits for the receive loop to end.
func (n *Notifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.done)
	ps, loop := n.ps, n.loop
	n.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-loop
	return err
}

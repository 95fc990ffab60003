package notify

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/leasekit/internal/backoff"
	"github.com/leasekit/leasekit/internal/port"
)

// The connections. A channel's connection key says which subscription
// connection serves it:
//
//   - plainKey: the one connection of a Single server, and a Cluster's
//     connection for plain channels (wake-up channels: PUBLISH in a cluster
//     reaches every node, so any node will do).
//   - "slot:N": a ClusterClient's connection for the sharded channels of
//     hash slot N (grant channels), on that slot's master. One per slot, not
//     per node: go-redis resubscribes a connection's sharded channels in one
//     SSUBSCRIBE after a reconnect, which Redis refuses for channels of
//     different slots.
//   - "tag:T": a Ring's connection for the channels with shard key T (the
//     hash tag), on that key's shard, where the release script PUBLISHes.
//
// A plain connection is kept until Close; a per-slot or per-tag one is closed
// once it serves no channel.
const plainKey = ""

// conn is one subscription connection and its receive loop.
type conn struct {
	key      string
	ps       port.Subscription
	sharded  bool // SSUBSCRIBE, on a slot's master
	channels int  // channelSubs on it; under Notifier.mu
	// reopens paces the first subscription of a connection that replaces
	// another (reopen): one that lost its slot, was refused with MOVED, or
	// was found dead; the pause grows while that repeats, and a confirmed
	// subscription resets it. Under Notifier.mu.
	reopens backoff.Backoff
	once    sync.Once
	err     error // why it could not be opened (a Ring without a shard up)
}

// connKey is the key of the connection that serves channel (with waiter
// ids: a grant channel).
func (n *Notifier) connKey(channel, id string) string {
	switch n.sub.Topology() {
	case port.Cluster, port.ClusterReplicas:
		if id != "" {
			return "slot:" + strconv.Itoa(Slot(channel))
		}
	case port.Ring:
		return "tag:" + hashTag(channel)
	}
	return plainKey
}

// open makes the connection with key, whose first channel is channel, and
// registers it. go-redis dials it on its first SUBSCRIBE, on the node or
// shard that channel picks. One that cannot be made has err set, and is not
// registered. Called with n.mu held.
func (n *Notifier) open(key, channel string) *conn {
	cn := &conn{key: key}
	cn.ps, cn.sharded, cn.err = n.pubsub(key, channel)
	if cn.err == nil {
		n.conns[key] = cn
	}
	return cn
}

// pubsub makes the subscription for the connection with key, one of whose
// channels is channel, and says whether it is sharded (SSUBSCRIBE, on a
// slot's master). It fails only on a Ring without a shard up.
func (n *Notifier) pubsub(key, channel string) (ps port.Subscription, sharded bool, err error) {
	switch n.sub.Topology() {
	case port.Cluster, port.ClusterReplicas:
		sharded = key != plainKey
	}
	ps, err = n.sub.Subscription(channel, sharded)
	return ps, sharded, err
}

// subscribe sends SUBSCRIBE, or SSUBSCRIBE on a sharded connection.
func (cn *conn) subscribe(ctx context.Context, channels ...string) error {
	if cn.err != nil {
		return cn.err
	}
	return cn.ps.Subscribe(ctx, channels...)
}

// unsubscribe sends UNSUBSCRIBE, or SUNSUBSCRIBE on a sharded connection.
func (cn *conn) unsubscribe(ctx context.Context, channel string) error {
	if cn.err != nil {
		return nil
	}
	return cn.ps.Unsubscribe(ctx, channel)
}

// run starts the connection's receive loop, once, unless the Notifier is
// closed: a Join that raced Close must not add a loop that Close's wait has
// stopped counting.
func (n *Notifier) run(cn *conn) {
	if cn.err != nil {
		return
	}
	cn.once.Do(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.closed {
			return
		}
		n.loops.Add(1)
		go n.receive(cn)
	})
}

// receive is cn's receive loop, which also runs its health check
// (health.go).
func (n *Notifier) receive(cn *conn) {
	defer n.loops.Done()
	pause := retryPause()
	h := health{heard: time.Now()}
	for {
		msg, err := cn.ps.Receive(context.Background(), h.deadline())
		if quietRead(err) {
			reopened, pingErr := n.check(cn, &h)
			if reopened {
				return
			}
			if pingErr == nil {
				continue
			}
			err = pingErr // the connection broke under the PING
		} else if answer(err) {
			h.hear(time.Now())
		}
		if err == nil || refusedPing(err) {
			pause.Reset()
			if n.handle(cn, msg) {
				return // reopened
			}
			continue
		}
		if n.ended(cn) {
			return
		}
		if n.refused(cn, err) {
			return // reopened
		}
		if !pause.Sleep(context.Background(), n.done) {
			return
		}
	}
}

// handle acts on what cn received, and reports whether it reopened cn.
func (n *Notifier) handle(cn *conn, ev port.Event) bool {
	switch ev.Kind {
	case "subscribe", "ssubscribe":
		n.confirm(cn, ev.Channel)
	case "sunsubscribe":
		return n.unsubscribed(cn, ev.Channel)
	case "message":
		n.deliver(ev)
	}
	return false
}

// deliver hands a message to the channel's waiters: a wake-up to the first
// without one pending, a grant to the waiter it names, or to stray when it
// names none; on a watched channel, a wake-up to every waiter.
func (n *Notifier) deliver(m port.Event) {
	n.mu.Lock()
	sub := n.subs[m.Channel]
	if sub != nil && sub.watched {
		sub.signalAll()
		n.mu.Unlock()
		return
	}
	delivered := sub != nil && (m.Payload == "" || sub.granted(m.Payload))
	if sub != nil && m.Payload == "" {
		sub.wakeOne()
	}
	n.mu.Unlock()
	if !delivered && m.Payload != "" {
		n.stray(m.Payload)
	}
}

// ended reports whether cn's receive loop should stop: the Notifier is
// closed, or cn was closed or replaced.
func (n *Notifier) ended(cn *conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed || n.conns[cn.key] != cn
}

// refused handles an error of cn's receive, and reports whether it reopened
// cn. An error reply answers a SUBSCRIBE: MOVED and the like (a sharded
// channel whose slot has another master than the one go-redis dialled)
// reopen cn on the slot's master; any other (an unknown command on Redis 6,
// an ACL refusal) fails cn's subscriptions still pending, whose waiters get
// it from Join. Anything else is a dropped connection: a plain one go-redis
// re-dials and resubscribes on the next receive (reconnected); a sharded one
// is reopened.
func (n *Notifier) refused(cn *conn, err error) bool {
	var reply port.ServerError
	if !errors.As(err, &reply) {
		if cn.sharded {
			// Not go-redis's re-dial: after a failover its slot map may
			// still name the old master, now a replica, which accepts
			// SSUBSCRIBE, where a release neither counts nor reaches it.
			return n.reopen(cn)
		}
		n.reconnected(cn)
		return false
	}
	if cn.sharded && movedOn(err) {
		return n.reopen(cn)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, sub := range n.subs {
		if sub.conn == cn && !sub.confirmed {
			n.failLocked(sub, err)
		}
	}
	return false
}

// movedOn reports whether err is a cluster redirection or a slot not served
// for now.
func movedOn(err error) bool {
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(err.Error(), p) {
			return true
		}
	}
	return false
}

// reconnected handles a dropped subscription connection, which go-redis
// re-dials and resubscribes: messages published meanwhile are lost, so every
// waiter on it checks its lock again, and the confirmations counted so far
// no longer match the requests, so every subscription on it counts as
// confirmed.
func (n *Notifier) reconnected(cn *conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for channel, sub := range n.subs {
		if sub.conn != cn {
			continue
		}
		delete(n.counts, channel)
		if !sub.confirmed {
			sub.confirmed = true
			close(sub.ready)
		}
		sub.signalAll()
	}
}

// confirm counts a subscription confirmation and readies the subscription it
// answers.
func (n *Notifier) confirm(cn *conn, channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cn.reopens.Reset()
	c := n.counts[channel]
	if c == nil {
		// A resubscription after a reconnect: the server may have lost the
		// lock's queue meanwhile (a restart, a failover), so every waiter
		// on the channel checks its lock again, now that it can be reached.
		if sub := n.subs[channel]; sub != nil {
			sub.signalAll()
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

// unsubscribed handles a SUNSUBSCRIBE confirmation, and reports whether it
// reopened cn. One this Notifier did not ask for is the server's: the
// channel's slot has moved to another master (a migration, a failover), and
// cn is reopened there.
func (n *Notifier) unsubscribed(cn *conn, channel string) bool {
	n.mu.Lock()
	if n.unsubs[channel] > 0 {
		if n.unsubs[channel]--; n.unsubs[channel] == 0 {
			delete(n.unsubs, channel)
		}
		n.mu.Unlock()
		return false
	}
	n.mu.Unlock()
	return n.reopen(cn)
}

// reopen replaces cn with a new connection, and subscribes its channels
// there: a sharded one that lost its slot or was refused by the node
// go-redis dialled, dialled after a backoff (and a reload of the cluster's
// slot map) on the slot's master of the moment; or any that the health
// check found dead (health.go). Their waiters check their locks again:
// releases meanwhile found no subscriber and skipped them, and messages
// sent to cn are lost. It reports whether cn was replaced (or, serving no
// channel, closed); it is not on a Ring whose shard is down, where cn
// stays.
func (n *Notifier) reopen(cn *conn) bool {
	n.mu.Lock()
	if n.closed || n.conns[cn.key] != cn {
		n.mu.Unlock()
		return false
	}
	var moved []*channelSub
	for _, sub := range n.subs {
		if sub.conn == cn {
			moved = append(moved, sub)
		}
	}
	if len(moved) == 0 {
		// Nothing to serve (its channels left while it failed): dialled
		// without a channel, a sharded one would go to a random node.
		delete(n.conns, cn.key)
		n.mu.Unlock()
		_ = cn.ps.Close()
		return true
	}
	ps, sharded, err := n.pubsub(cn.key, moved[0].channel)
	if err != nil {
		n.mu.Unlock()
		return false
	}
	next := &conn{key: cn.key, ps: ps, sharded: sharded, reopens: cn.reopens}
	if next.reopens == (backoff.Backoff{}) {
		next.reopens = retryPause()
	}
	pause := next.reopens.Next()
	n.conns[cn.key] = next
	for _, sub := range moved {
		sub.conn = next
		next.channels++
		delete(n.counts, sub.channel)
		if !sub.confirmed {
			sub.confirmed = true
			close(sub.ready)
		}
		sub.signalAll()
	}
	n.mu.Unlock()
	_ = cn.ps.Close()
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		if sharded {
			n.sub.Reload(context.Background()) // lazily: during the backoff
		}
		if !n.sleep(pause) || sharded && !n.locate(moved[0].channel) {
			return
		}
		n.send.Lock()
		if channels := n.still(next, moved); len(channels) > 0 {
			// Of one slot when sharded: one SSUBSCRIBE.
			_ = next.subscribe(context.Background(), channels...)
		}
		n.send.Unlock()
		n.run(next)
	}()
	return true
}

// still returns the channels of the subscriptions moved to cn that are
// still subscribed: one whose last waiter left meanwhile is not subscribed
// again, nor one subscribed anew, whose Join sent its own SUBSCRIBE. Called
// with n.send held.
func (n *Notifier) still(cn *conn, moved []*channelSub) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var channels []string
	for _, sub := range moved {
		if n.subs[sub.channel] == sub && sub.conn == cn {
			channels = append(channels, sub.channel)
		}
	}
	return channels
}

// sleep pauses for d, and reports false if the Notifier was closed meanwhile.
func (n *Notifier) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.done:
		return false
	case <-t.C:
		return true
	}
}

// retryPause is the pause between a connection's failed receives, and
// between locate's tries: doubling from 10 ms to a second.
func retryPause() backoff.Backoff {
	return backoff.Backoff{First: 10 * time.Millisecond, Max: time.Second}
}

// locateTries bounds locate: its pauses, doubling from 10 ms to a second,
// add up to about five seconds.
const locateTries = 10

// locate waits until the cluster client's slot map names as the master of
// channel's slot a node that serves the slot, so that a SSUBSCRIBE dialled by
// that map goes to the master: a replica, or a master the slot has left,
// would accept the subscription, where no release counts or reaches it
// (port.Subscriber's Serves); while the map lags, it is reloaded, with
// growing pauses. It reports false if the Notifier was closed meanwhile;
// after locateTries it gives up and lets the subscription go where the map
// says.
func (n *Notifier) locate(channel string) bool {
	ctx := context.Background()
	pause := retryPause()
	for range locateTries {
		if n.sub.Serves(ctx, channel) {
			return true
		}
		n.sub.Reload(ctx)
		if !pause.Sleep(ctx, n.done) {
			return false
		}
	}
	return true
}

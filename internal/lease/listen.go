package lease

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/leasekit/leasekit/internal/notify"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/scripts"
)

// listener is how a Core's waiters hear of a release. On a Single server
// (one server, or a Sentinel-managed master) the Core has one grant channel
// for every lock, on which a release that hands a lock to one of its waiters
// says so. On a Cluster (Redis 7 and later) it has one sharded grant
// channel per lock, which hashes to the lock's slot: the release runs on the
// slot's master and counts and reaches that node's subscribers only. Where
// waiters cannot queue (a Ring; a Redis 6 cluster, found when SSUBSCRIBE is
// refused; a ClusterClient that reads from replicas, where its subscriptions
// would be too; a client of a type of its own), they subscribe to the lock's
// wake-up channel, and a release that deletes the lock publishes there.
type listener struct {
	c        *Core
	notifier *notify.Notifier
	grants   string // the grant channel on one server; "" elsewhere
	id       string // names the sharded grant channels
	sharded  atomic.Bool
	once     sync.Once
	// channels is the release script's ARGV[4], boxed once: "1" when grant
	// channels are sharded.
	channels any
	// early counts the joins started while a probe runs that are still under
	// way (see joinEarly); close waits for them. Under mu, with closing,
	// which stops new ones.
	mu      sync.Mutex
	closing bool
	early   sync.WaitGroup
}

func newListener(c *Core) *listener {
	l := &listener{c: c, channels: plainChannels}
	l.notifier = notify.New(c.cfg.Conn, c.strays.heard)
	switch c.cfg.Conn.Topology() {
	case port.Single:
		l.grants = scripts.GrantChannel(c.cfg.Prefix, rand.Text())
	case port.Cluster:
		l.channels = shardedChannels
		l.id = rand.Text()
		l.sharded.Store(true)
	case port.ClusterReplicas:
		l.channels = shardedChannels
		c.logger().Info(c.cfg.Kind + ": the cluster client reads from replicas, where its subscriptions would be too: waiters do not queue, and a release wakes one waiter per Locker")
	case port.Ring:
		c.logger().Info(c.cfg.Kind + ": waiters on a Ring do not queue: a release wakes one waiter per Locker, which tries again")
	}
	return l
}

// join subscribes a waiter for the lock at lk to what tells it of a release,
// and returns its random id when it queues (its entry names it, and grant
// messages for it carry it), or "" when it does not.
func (l *listener) join(ctx context.Context, lk *keySet) (*notify.Waiter, string, error) {
	channel, id := scripts.WakeChannel(lk.key), ""
	switch {
	case l.grants != "":
		channel, id = l.grants, rand.Text()
	case l.sharded.Load():
		channel, id = scripts.ShardedGrantChannel(lk.key, l.id), rand.Text()
	}
	sub, err := l.notifier.Join(ctx, channel, id)
	if err != nil && l.grants == "" && id != "" && strings.Contains(err.Error(), "unknown command") {
		l.unshard(err)
		sub, err = l.notifier.Join(ctx, scripts.WakeChannel(lk.key), "")
		id = ""
	}
	return sub, id, err
}

// unshard makes the Core's waiters stop queueing, on a cluster that refused
// a sharded subscription with err (Redis 6 has none), and says so once.
func (l *listener) unshard(err error) {
	l.sharded.Store(false)
	l.once.Do(func() {
		l.c.logger().Warn(l.c.cfg.Kind+": the cluster has no sharded pub/sub (Redis 7 and later): waiters do not queue, and a release wakes one waiter per Locker",
			"err", err)
	})
}

func (l *listener) close() error {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	err := l.notifier.Close()
	l.early.Wait()
	return err
}

// joinEarly starts joining a waiter for the lock at lk while its probe runs,
// when joining would cost round trips: on one server, until the Core's grant
// channel is first subscribed (a fresh process's first wait), the
// subscription connection's dial, handshake and SUBSCRIBE. It returns nil
// otherwise, and the waiter joins after its probe: on a cluster each lock has
// a grant channel of its own, and every acquire that its probe grants would
// leave one subscribed. Either way the waiter queues only once subscribed.
func (l *listener) joinEarly(ctx context.Context, lk *keySet) *pendingJoin {
	if l.grants == "" || l.notifier.Subscribed(l.grants) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return nil // the join after the probe fails as it should
	}
	p := &pendingJoin{done: make(chan struct{})}
	l.early.Go(func() {
		sub, id, err := l.join(ctx, lk)
		p.finish(sub, id, err)
	})
	return p
}

// pendingJoin is a join that joinEarly started. The waiter's probe either
// finds the lock held, and the waiter waits for the join (result), or takes
// it (or fails), and the join is dropped: the waiter leaves as soon as it has
// joined, and its Core's grant channel stays subscribed for later waits.
type pendingJoin struct {
	done    chan struct{} // closed once joined
	mu      sync.Mutex
	dropped bool
	sub     *notify.Waiter // nil when the join failed
	id      string
	err     error
}

func (p *pendingJoin) finish(sub *notify.Waiter, id string, err error) {
	if err != nil {
		sub = nil // Join left already
	}
	p.mu.Lock()
	p.sub, p.id, p.err = sub, id, err
	dropped := p.dropped
	p.mu.Unlock()
	close(p.done)
	if dropped && sub != nil {
		sub.Leave()
	}
}

// result waits for the join and returns what listener.join would have.
func (p *pendingJoin) result() (*notify.Waiter, string, error) {
	<-p.done
	return p.sub, p.id, p.err
}

// drop gives up the join without waiting for it. A nil p does nothing.
func (p *pendingJoin) drop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.dropped = true
	sub := p.sub
	p.mu.Unlock()
	if sub != nil {
		sub.Leave()
	}
}

// Watch subscribes to channel on the Core's notifier for hints, as
// notify.Notifier.Watch does (an election's observers use it): no second
// subscription connection. The caller must call Leave.
func (c *Core) Watch(ctx context.Context, channel string) (*notify.Waiter, error) {
	if c.closed.Load() {
		return nil, notify.ErrClosed
	}
	return c.listen.notifier.Watch(ctx, channel)
}

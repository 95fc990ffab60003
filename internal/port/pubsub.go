package port

import (
	"context"
	"time"
)

// Topology says how a client spreads keys over servers, which decides
// where the engine subscribes.
type Topology int

const (
	// Single is one server.
	Single Topology = iota
	// Cluster is a Redis Cluster: hash slots on masters, and SSUBSCRIBE
	// on the master of a channel's slot.
	Cluster
	// ClusterReplicas is a Cluster whose client reads from replicas, where
	// its subscriptions would be too: no sharded subscription is made.
	ClusterReplicas
	// Ring is shards chosen by a key's hash tag, with no failover.
	Ring
	// Other is a client whose topology its adapter cannot tell (a go-redis
	// client of a type of its own): subscribed as a Single server's, and
	// waiters do not queue.
	Other
)

// Subscriber makes the subscription connections the engine listens on.
// Its methods are safe for concurrent use.
type Subscriber interface {
	Topology() Topology
	// Subscription makes a subscription connection for channel and the
	// channels that share its node, dialled on its first Subscribe:
	// sharded (Cluster only), on the master of channel's slot, with
	// SSUBSCRIBE; on a Ring, on channel's shard; else on the client's
	// server (any node of a cluster). It fails only on a Ring without
	// that shard up.
	Subscription(channel string, sharded bool) (Subscription, error)
	// Ping sends PING on the command connections to the node that serves
	// channel: its slot's master when sharded, its shard on a Ring, any
	// node of a cluster else.
	Ping(ctx context.Context, channel string, sharded bool) error
	// Serves reports whether the client's slot map names, as the master of
	// channel's slot, a node that serves the slot: a read there of channel
	// as a key is not redirected (Cluster only).
	Serves(ctx context.Context, channel string) bool
	// Reload has the client read the cluster's slot map again (Cluster
	// only; it may do so in the background).
	Reload(ctx context.Context)
}

// Subscription is one subscription connection. Only its receive loop
// calls Receive; the other methods may be called concurrently with it.
type Subscription interface {
	// Subscribe sends SUBSCRIBE for channels, or SSUBSCRIBE on a sharded
	// connection.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe sends UNSUBSCRIBE, or SUNSUBSCRIBE on a sharded
	// connection.
	Unsubscribe(ctx context.Context, channel string) error
	// Ping sends PING on the connection; its answer comes to Receive.
	Ping(ctx context.Context) error
	// Receive waits at most timeout for what the server sends. Its error
	// is one that matches os.ErrDeadlineExceeded when nothing came (the
	// connection is kept), a ServerError answering a request, or any other
	// when the connection dropped: a classic (not sharded) subscription
	// dials again and subscribes its channels again on the next Receive,
	// whose confirmations then come as for a Subscribe.
	Receive(ctx context.Context, timeout time.Duration) (Event, error)
	Close() error
}

// Event is what a Subscription received.
type Event struct {
	// Kind is "message" (a sharded one's too), "subscribe", "ssubscribe",
	// "unsubscribe", "sunsubscribe" or "pong".
	Kind             string
	Channel, Payload string
}

// Conn is a client that both sends the engine's commands and subscribes.
type Conn interface {
	Client
	Subscriber
}

package port

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// GoRedis returns the Conn that sends and subscribes through the go-redis
// client c: a *redis.Client, a *redis.ClusterClient, a *redis.Ring or a
// type of one's own (Other). It adds nothing to a command but
// its key's position (KeyPos), so that a cluster client routes even a
// command its COMMAND table lacks.
// The Conn is Remembering: a Core keeps its Conn, and with it what it
// learnt of the server.
func GoRedis(c redis.UniversalClient) Conn { return goRedis{c, new(Memory)} }

type goRedis struct {
	c redis.UniversalClient
	m *Memory
}

func (g goRedis) Memory() *Memory { return g.m }

// ok is the reply OK, boxed once.
var ok any = "OK"

func (g goRedis) Do(ctx context.Context, args ...any) (any, error) {
	if name, _ := args[0].(string); name == "SET" {
		// A SET answers OK or nil: read as a boolean, its reply boxes
		// nothing, and a nil reply is not an error that go-redis sorts
		// (which allocates) before it returns it.
		cmd := redis.NewBoolCmd(ctx, args...)
		cmd.SetFirstKeyPos(1)
		_ = g.c.Process(ctx, cmd) // its error is cmd's
		switch set, err := cmd.Result(); {
		case err != nil:
			return nil, err
		case !set:
			return nil, Nil
		}
		return ok, nil
	}
	cmd := redis.NewCmd(ctx, args...)
	if pos := KeyPos(args); pos > 0 {
		cmd.SetFirstKeyPos(int8(pos))
	}
	_ = g.c.Process(ctx, cmd) // its error is cmd's
	return cmd.Val(), cmd.Err()
}

func (g goRedis) Pipe(ctx context.Context, key string, cmds ...[]any) []Reply {
	replies := make([]Reply, len(cmds))
	var node redis.Cmdable = g.c
	if cc, ok := g.c.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, key)
		if err != nil {
			for i := range replies {
				replies[i].Err = err
			}
			return replies
		}
		node = master
	}
	pipe := node.Pipeline()
	sent := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		sent[i] = pipe.Do(ctx, args...)
	}
	// Exec's error is the first command's that failed, or the whole
	// pipeline's, which go-redis does not always set on its commands.
	_, err := pipe.Exec(ctx)
	whole := err != nil
	for i, cmd := range sent {
		replies[i] = Reply{Val: cmd.Val(), Err: cmd.Err()}
		whole = whole && replies[i].Err == nil
	}
	if whole {
		for i := range replies {
			replies[i].Err = err
		}
	}
	return replies
}

func (g goRedis) Masters(ctx context.Context) (map[string]Client, error) {
	cc, ok := g.c.(*redis.ClusterClient)
	if !ok {
		return nil, nil
	}
	var mu sync.Mutex
	masters := make(map[string]Client)
	err := cc.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters[node.Options().Addr] = goRedis{node, g.m}
		return nil
	})
	return masters, err
}

func (g goRedis) LoadScript(ctx context.Context, src string) error {
	return g.c.ScriptLoad(ctx, src).Err()
}

// RetryWindow: go-redis writes a command again after the read timed out
// (or the connection broke), a pause of at most MaxRetryBackoff, a dial
// and a write: 16 s with go-redis v9.23's defaults. A client with no read
// or write deadline, or of a type of its own, cannot tell.
func (g goRedis) RetryWindow() time.Duration {
	var dial, read, write, pause time.Duration
	switch c := g.c.(type) {
	case *redis.Client:
		o := c.Options()
		dial, read, write, pause = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := c.Options()
		dial, read, write, pause = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.Ring:
		o := c.Options()
		dial, read, write, pause = o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	default:
		return 0
	}
	if read <= 0 || write <= 0 {
		return 0
	}
	return dial + read + write + max(pause, 0)
}

func (g goRedis) Topology() Topology {
	switch c := g.c.(type) {
	case *redis.ClusterClient:
		if o := c.Options(); o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
			return ClusterReplicas
		}
		return Cluster
	case *redis.Ring:
		return Ring
	case *redis.Client:
		return Single
	}
	return Other
}

func (g goRedis) Subscription(channel string, sharded bool) (Subscription, error) {
	ctx := context.Background()
	switch c := g.c.(type) {
	case *redis.ClusterClient:
		if sharded {
			return goRedisSub{c.SSubscribe(ctx), true}, nil
		}
		return goRedisSub{c.Subscribe(ctx), false}, nil
	case *redis.Ring:
		// The shard of the channel's hash tag, where a script on a key
		// with that tag runs and PUBLISHes.
		shard, err := c.GetShardClientForKey(channel)
		if err != nil {
			return nil, err
		}
		return goRedisSub{shard.Subscribe(ctx), false}, nil
	}
	return goRedisSub{g.c.Subscribe(ctx), false}, nil
}

func (g goRedis) Ping(ctx context.Context, channel string, sharded bool) error {
	switch c := g.c.(type) {
	case *redis.ClusterClient:
		if sharded {
			node, err := c.MasterForKey(ctx, channel)
			if err != nil {
				return err
			}
			return node.Ping(ctx).Err()
		}
	case *redis.Ring:
		shard, err := c.GetShardClientForKey(channel)
		if err != nil {
			return err
		}
		return shard.Ping(ctx).Err()
	}
	return g.c.Ping(ctx).Err()
}

// Serves reads channel as a key (PTTL, which leasekit's key pattern
// allows) on the master the slot map names, which answers MOVED while it
// does not serve the slot.
func (g goRedis) Serves(ctx context.Context, channel string) bool {
	c, ok := g.c.(*redis.ClusterClient)
	if !ok {
		return true
	}
	node, err := c.MasterForKey(ctx, channel)
	if err != nil {
		return false
	}
	err = node.PTTL(ctx, channel).Err()
	return err == nil || !Redirected(err)
}

func (g goRedis) Reload(ctx context.Context) {
	if c, ok := g.c.(*redis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
}

// goRedisSub is a go-redis PubSub, sharded or not.
type goRedisSub struct {
	ps      *redis.PubSub
	sharded bool
}

func (s goRedisSub) Subscribe(ctx context.Context, channels ...string) error {
	if s.sharded {
		return s.ps.SSubscribe(ctx, channels...)
	}
	return s.ps.Subscribe(ctx, channels...)
}

func (s goRedisSub) Unsubscribe(ctx context.Context, channel string) error {
	if s.sharded {
		return s.ps.SUnsubscribe(ctx, channel)
	}
	return s.ps.Unsubscribe(ctx, channel)
}

func (s goRedisSub) Ping(ctx context.Context) error { return s.ps.Ping(ctx) }

// Receive: go-redis keeps the connection after a read deadline
// (ReceiveTimeout), and re-dials a dropped one on the next receive,
// subscribing its channels again.
func (s goRedisSub) Receive(ctx context.Context, timeout time.Duration) (Event, error) {
	msg, err := s.ps.ReceiveTimeout(ctx, timeout)
	switch m := msg.(type) {
	case *redis.Subscription:
		return Event{Kind: m.Kind, Channel: m.Channel}, err
	case *redis.Message:
		return Event{Kind: "message", Channel: m.Channel, Payload: m.Payload}, err
	case *redis.Pong:
		return Event{Kind: "pong"}, err
	}
	return Event{}, err
}

func (s goRedisSub) Close() error { return s.ps.Close() }

// Package rueidisconn runs leasekit's locks on a rueidis client: a
// standalone, sentinel or cluster rueidis.Client, shared with the rest of a
// service, so that locks need no second client and no pools of their own.
//
//	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	...
//	locker := efficiency.NewConn(rueidisconn.New(client))
//	fenced := correctness.NewConn(rueidisconn.New(client))
//
// Both kinds, semaphores, elections, the operator tools and the Register
// work on it as on go-redis; waiters hear releases through the client's own
// pub/sub (a dedicated connection per subscription, SSUBSCRIBE per hash
// slot on a cluster), with leasekit's health check of a subscription that
// went quiet. It is a module of its own: a service on go-redis resolves no
// module of rueidis's.
//
// rueidis never writes a command of leasekit's again after its reply was
// lost (they are not read-only), so leasekit's own resends are the only
// ones, and they are safe (the scripts recognise them).
package rueidisconn

import (
	"context"
	"fmt"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/redis/rueidis"
)

// New returns the Conn that sends leasekit's commands and subscribes
// through c; pass it to efficiency.NewConn, correctness.NewConn or
// correctness.NewRegisterConn. One per client is enough for every Locker.
// It panics if c is nil. Closing c fails every later call of the Lockers
// on it with their ErrClosed.
func New(c rueidis.Client) port.Conn {
	if c == nil {
		panic("rueidisconn: New: nil rueidis client")
	}
	return &conn{c: c, m: new(port.Memory)}
}

type conn struct {
	c rueidis.Client
	m *port.Memory
}

func (c *conn) Memory() *port.Memory { return c.m }

// cluster reports whether c is a cluster's client.
func (c *conn) cluster() bool { return c.c.Mode() == rueidis.ClientModeCluster }

func (c *conn) Do(ctx context.Context, args ...any) (any, error) {
	return reply(c.c.Do(ctx, build(c.c.B(), args)))
}

// build makes the command args (args[0] its name), its key marked for the
// cluster's routing (port.KeyPos): rueidis hashes the keys it is given, and
// every key of a command of leasekit's shares the first one's slot.
func build(b rueidis.Builder, args []any) rueidis.Completed {
	s := port.Texts(args)
	pos := port.KeyPos(args)
	if pos == 0 {
		return b.Arbitrary(s...).Build()
	}
	return b.Arbitrary(s[:pos]...).Keys(s[pos]).Args(s[pos+1:]...).Build()
}

// reply is r as the port's conventions give it.
func reply(r rueidis.RedisResult) (any, error) {
	v, err := r.ToAny()
	if err != nil {
		return nil, fault(err)
	}
	return errorsIn(v), nil
}

// fault is err of rueidis's as the port's conventions give it: a nil
// reply is port.Nil, an error reply a port.ServerError, and the client's
// closing matches port.ErrClosed.
func fault(err error) error {
	switch {
	case err == nil:
		return nil
	case rueidis.IsRedisNil(err):
		return port.Nil
	case err == rueidis.ErrClosing:
		return fmt.Errorf("%w (rueidis: %w)", port.ErrClosed, err)
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		return port.ReplyError(re.Error())
	}
	return err
}

// errorsIn replaces the error replies of rueidis in v (an array's
// elements, a map's values) with port.ServerErrors.
func errorsIn(v any) any {
	switch x := v.(type) {
	case []any:
		for i, e := range x {
			x[i] = errorsIn(e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = errorsIn(e)
		}
	case error:
		return fault(x)
	}
	return v
}

func (c *conn) Pipe(ctx context.Context, key string, cmds ...[]any) []port.Reply {
	b := c.c.B()
	multi := make([]rueidis.Completed, len(cmds))
	for i, args := range cmds {
		multi[i] = build(b, args)
	}
	// A cluster client sends keyless commands (WAIT) with the keyed ones,
	// to the master of their slot; every keyed command shares key's.
	results := c.c.DoMulti(ctx, multi...)
	replies := make([]port.Reply, len(results))
	for i, r := range results {
		replies[i].Val, replies[i].Err = reply(r)
	}
	return replies
}

func (c *conn) LoadScript(ctx context.Context, src string) error {
	masters, err := c.masters(ctx)
	if err != nil {
		return err
	}
	for _, m := range masters {
		if _, err := reply(m.Do(ctx, m.B().ScriptLoad().Script(src).Build())); err != nil {
			return err
		}
	}
	return nil
}

// masters are the clients of a cluster's masters, by address (ROLE tells
// them from the replicas the client knows), or c's client alone, under "".
func (c *conn) masters(ctx context.Context) (map[string]rueidis.Client, error) {
	if !c.cluster() {
		return map[string]rueidis.Client{"": c.c}, nil
	}
	masters := make(map[string]rueidis.Client)
	for addr, node := range c.c.Nodes() {
		role, err := reply(node.Do(ctx, node.B().Role().Build()))
		if err != nil {
			return nil, fmt.Errorf("ROLE on %s: %w", addr, err)
		}
		if r, _ := role.([]any); len(r) > 0 && r[0] == "master" {
			masters[addr] = node
		}
	}
	if len(masters) == 0 {
		return nil, fmt.Errorf("rueidisconn: the cluster client knows no master")
	}
	return masters, nil
}

func (c *conn) Masters(ctx context.Context) (map[string]port.Client, error) {
	if !c.cluster() {
		return nil, nil
	}
	nodes, err := c.masters(ctx)
	if err != nil {
		return nil, err
	}
	masters := make(map[string]port.Client, len(nodes))
	for addr, node := range nodes {
		masters[addr] = &conn{c: node, m: c.m}
	}
	return masters, nil
}

// RetryWindow: rueidis writes none of leasekit's commands again after its
// reply was lost (none is read-only), but a caller may: it cannot tell.
func (c *conn) RetryWindow() time.Duration { return 0 }

func (c *conn) Topology() port.Topology {
	if c.cluster() {
		return port.Cluster
	}
	return port.Single
}

// Subscription is a dedicated connection of the client's with pub/sub
// hooks, dialled on its first Subscribe: on a cluster, SSUBSCRIBE picks the
// master of the channels' slot, and SUBSCRIBE any node.
func (c *conn) Subscription(channel string, sharded bool) (port.Subscription, error) {
	dial := func(h port.Hooks) (port.Line, <-chan error) {
		dc, release := c.c.Dedicate()
		broken := dc.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage:      func(m rueidis.PubSubMessage) { h.Message(m.Channel, m.Message) },
			OnSubscription: func(m rueidis.PubSubSubscription) { h.Subscription(m.Kind, m.Channel) },
		})
		return line{dc, release}, broken
	}
	return port.Hooked(dial, sharded && c.cluster()), nil
}

// line is a dedicated connection, as port.Hooked uses it.
type line struct {
	dc      rueidis.DedicatedClient
	release func()
}

func (l line) Subscribe(ctx context.Context, sharded bool, channels ...string) error {
	if sharded {
		return fault(l.dc.Do(ctx, l.dc.B().Ssubscribe().Channel(channels...).Build()).Error())
	}
	return fault(l.dc.Do(ctx, l.dc.B().Subscribe().Channel(channels...).Build()).Error())
}

func (l line) Unsubscribe(ctx context.Context, sharded bool, channel string) error {
	if sharded {
		return fault(l.dc.Do(ctx, l.dc.B().Sunsubscribe().Channel(channel).Build()).Error())
	}
	return fault(l.dc.Do(ctx, l.dc.B().Unsubscribe().Channel(channel).Build()).Error())
}

func (l line) Ping(ctx context.Context) error {
	return fault(l.dc.Do(ctx, l.dc.B().Ping().Build()).Error())
}

func (l line) Close() {
	l.dc.Close()
	l.release()
}

func (c *conn) Ping(ctx context.Context, channel string, sharded bool) error {
	if sharded && c.cluster() {
		// A round trip to the master of channel's slot: PTTL of the
		// channel's name as a key, as Serves reads it.
		_, err := c.Do(ctx, "PTTL", channel)
		return err
	}
	_, err := reply(c.c.Do(ctx, c.c.B().Ping().Build()))
	return err
}

// Serves reads channel as a key (PTTL) on a connection dedicated to its
// slot, which the client picked by its slot map: a master that does not
// serve the slot answers MOVED, and rueidis then reads the map again.
func (c *conn) Serves(ctx context.Context, channel string) bool {
	if !c.cluster() {
		return true
	}
	dc, release := c.c.Dedicate()
	defer release()
	_, err := reply(dc.Do(ctx, dc.B().Pttl().Key(channel).Build()))
	return err == nil || !port.Redirected(err)
}

// Reload: rueidis reads the slot map again by itself after a MOVED (as
// Serves gets one), and has no call to ask it to.
func (c *conn) Reload(context.Context) {}

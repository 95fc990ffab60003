package port_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/leasekit/leasekit/internal/port"
	"github.com/redis/go-redis/v9"
)

func TestKeyPos(t *testing.T) {
	for _, c := range []struct {
		args []any
		want int
	}{
		{[]any{"evalsha", "sha", 2, "k1", "k2", "a"}, 3},
		{[]any{"EVAL", "src", 1, "k"}, 3},
		{[]any{"evalsha", "sha", 0, "a"}, 0},
		{[]any{"SET", "k", "v", "PX", 10, "NX"}, 1},
		{[]any{"DELIFEQ", "k", "v"}, 1},
		{[]any{"hmget", "k", "value"}, 1},
		{[]any{"WAIT", 1, 100}, 0},
		{[]any{"command", "info", "DELEX"}, 0},
		{[]any{"PING"}, 0},
	} {
		if got := port.KeyPos(c.args); got != c.want {
			t.Errorf("KeyPos(%v): got %d, want %d", c.args, got, c.want)
		}
	}
}

func TestInt64(t *testing.T) {
	if n, err := port.Int64(int64(7), nil); n != 7 || err != nil {
		t.Errorf("int64 7: got %d, %v", n, err)
	}
	if n, err := port.Int64("42", nil); n != 42 || err != nil {
		t.Errorf(`"42": got %d, %v`, n, err)
	}
	if _, err := port.Int64([]any{}, nil); err == nil {
		t.Error("an array read as an integer: got no error")
	}
	cause := errors.New("cut")
	if _, err := port.Int64(nil, cause); !errors.Is(err, cause) {
		t.Errorf("a failed command: got %v, want its error", err)
	}
}

// TestGoRedis checks the go-redis adapter's conventions: a SET answers OK
// or Nil, an error reply is a ServerError, a Pipe's replies come in order,
// and the resend window is read from the client's options.
func TestGoRedis(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, MaxRetryBackoff: 4 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	c, ctx := port.GoRedis(rdb), context.Background()

	if v, err := c.Do(ctx, "SET", "k", "v", "PX", 60000, "NX"); v != "OK" || err != nil {
		t.Fatalf("SET NX on a free key: got %v, %v; want OK", v, err)
	}
	if v, err := c.Do(ctx, "SET", "k", "w", "PX", 60000, "NX"); v != nil || !errors.Is(err, port.Nil) {
		t.Fatalf("SET NX on a held key: got %v, %v; want Nil", v, err)
	}
	var re port.ServerError
	if _, err := c.Do(ctx, "HMGET", "k", "f"); !errors.As(err, &re) {
		t.Fatalf("HMGET on a string: got %v, want a ServerError", err)
	}
	replies := c.Pipe(ctx, "k", []any{"GET", "k"}, []any{"PTTL", "k"}, []any{"GET", "none"})
	if len(replies) != 3 || replies[0].Val != "v" || replies[0].Err != nil {
		t.Fatalf("Pipe: got %+v; want v first", replies)
	}
	if ms, err := port.Int64(replies[1].Val, replies[1].Err); err != nil || ms <= 0 || ms > 60000 {
		t.Errorf("Pipe's PTTL: got %d, %v", ms, err)
	}
	if !errors.Is(replies[2].Err, port.Nil) {
		t.Errorf("Pipe's GET of no key: got %v, want Nil", replies[2].Err)
	}
	if err := c.LoadScript(ctx, "return 1"); err != nil {
		t.Errorf("LoadScript: %v", err)
	}
	if got, want := c.RetryWindow(), 10*time.Second; got != want {
		t.Errorf("RetryWindow: got %v, want %v (dial + read + write + backoff)", got, want)
	}
	noDeadline := redis.NewClient(&redis.Options{Addr: m.Addr(), ReadTimeout: -1})
	t.Cleanup(func() { _ = noDeadline.Close() })
	if got := port.GoRedis(noDeadline).RetryWindow(); got != 0 {
		t.Errorf("RetryWindow with no read deadline: got %v, want 0 (cannot tell)", got)
	}
}

// TestGoRedisSubscription checks the go-redis adapter's subscriptions: a
// confirmation and a message come as Events, a quiet read matches
// os.ErrDeadlineExceeded, and each client type has its Topology.
func TestGoRedisSubscription(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, ctx := port.GoRedis(rdb), context.Background()
	if got := c.Topology(); got != port.Single {
		t.Errorf("a *redis.Client's Topology: got %v, want Single", got)
	}
	sub, err := c.Subscription("ch", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	if err := sub.Subscribe(ctx, "ch"); err != nil {
		t.Fatal(err)
	}
	if ev, err := sub.Receive(ctx, 5*time.Second); err != nil || ev != (port.Event{Kind: "subscribe", Channel: "ch"}) {
		t.Fatalf("after SUBSCRIBE: got %+v, %v; want its confirmation", ev, err)
	}
	if _, err := sub.Receive(ctx, 50*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a quiet read: got %v, want os.ErrDeadlineExceeded", err)
	}
	if err := rdb.Publish(ctx, "ch", "hello").Err(); err != nil {
		t.Fatal(err)
	}
	if ev, err := sub.Receive(ctx, 5*time.Second); err != nil || ev != (port.Event{Kind: "message", Channel: "ch", Payload: "hello"}) {
		t.Fatalf("after PUBLISH: got %+v, %v; want the message", ev, err)
	}
	if err := c.Ping(ctx, "ch", false); err != nil {
		t.Errorf("Ping: %v", err)
	}
	if !c.Serves(ctx, "ch") {
		t.Error("Serves on one server: got false, want true")
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": m.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{m.Addr()}, ReadOnly: true})
	t.Cleanup(func() { _ = cluster.Close() })
	for _, tc := range []struct {
		c    redis.UniversalClient
		want port.Topology
	}{{ring, port.Ring}, {cluster, port.ClusterReplicas}, {ownType{rdb}, port.Other}} {
		if got := port.GoRedis(tc.c).Topology(); got != tc.want {
			t.Errorf("%T's Topology: got %v, want %v", tc.c, got, tc.want)
		}
	}
}

// ownType is a go-redis client of a type of its own.
type ownType struct{ *redis.Client }

// TestPipeFailedAsAWhole checks that a pipeline that could not run (no
// server) has its error in every reply, not only in Exec's.
func TestPipeFailedAsAWhole(t *testing.T) {
	m := miniredis.RunT(t)
	addr := m.Addr()
	m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	for i, r := range port.GoRedis(rdb).Pipe(context.Background(), "k", []any{"GET", "k"}, []any{"PTTL", "k"}) {
		if r.Err == nil {
			t.Errorf("reply %d: got no error from a pipeline with no server", i)
		}
	}
}

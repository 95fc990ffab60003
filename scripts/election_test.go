package scripts_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

// election runs the election scripts on one backend, with a subscriber on
// the election's channel.
type election struct {
	t    *testing.T
	b    *redistest.Backend
	keys []string
	sub  *redis.PubSub
}

const electionChannel = "lock:leader"

func newElection(t *testing.T, b *redistest.Backend) *election {
	t.Helper()
	sub := b.Client.Subscribe(t.Context(), electionChannel)
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.ReceiveTimeout(t.Context(), 5*time.Second); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	return &election{t: t, b: b, keys: []string{"lock", "lock:leader"}, sub: sub}
}

func (e *election) run(s *scripts.Script, args ...any) any {
	e.t.Helper()
	reply, err := redistest.Script(s).Run(e.t.Context(), e.b.Client, e.keys, args...).Result()
	if err != nil {
		e.t.Fatalf("%v", err)
	}
	return reply
}

// heard returns the next message on the channel.
func (e *election) heard() string {
	e.t.Helper()
	m, err := e.sub.ReceiveMessage(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return m.Payload
}

// TestElectionAnnounce: only the holder of the grant takes office, with the
// waiters' mark on the lock or without; the notice carries the term exactly
// (16 digits), the lock's ttl and the value, spaces and all.
func TestElectionAnnounce(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		e := newElection(t, b)
		ctx := t.Context()
		const grant = "owner-a:1795974129470711"
		if got := e.run(scripts.ElectionAnnounce, grant, "v", electionChannel); got != int64(0) {
			t.Fatalf("announce of a free lock: got %v, want 0", got)
		}
		b.Client.Set(ctx, "lock", "owner-b:1795974129470712", time.Minute)
		if got := e.run(scripts.ElectionAnnounce, grant, "v", electionChannel); got != int64(0) {
			t.Fatalf("announce of another grant's lock: got %v, want 0", got)
		}
		if n := b.Client.Exists(ctx, "lock:leader").Val(); n != 0 {
			t.Fatal("a refused announce wrote the leader key")
		}
		for _, held := range []string{grant, grant + "*"} {
			b.Client.Set(ctx, "lock", held, time.Minute)
			if got := e.run(scripts.ElectionAnnounce, grant, "host a", electionChannel); got != int64(1) {
				t.Fatalf("announce by the holder of %q: got %v, want 1", held, got)
			}
			m := e.heard()
			var ttl int64
			if _, err := fmt.Sscanf(m, "elected 1795974129470711 %d ", &ttl); err != nil || ttl <= 0 || ttl > 60000 || !strings.HasSuffix(m, " host a") {
				t.Fatalf("notice %q: %v, want the term, the ttl and the value", m, err)
			}
			got := b.Client.HGetAll(ctx, "lock:leader").Val()
			if got["grant"] != grant || got["value"] != "host a" {
				t.Fatalf("leader key: got %v, want the grant and value", got)
			}
		}
	})
}

// TestElectionLeader: the leader is read with its lock: none when the lock is
// free, waiting when its grant has not taken office (a leader key left by
// an earlier grant names nobody), the term and value when it has.
func TestElectionLeader(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		e := newElection(t, b)
		ctx := t.Context()
		check := func(when string, want []any) {
			t.Helper()
			got, _ := e.run(scripts.ElectionLeader, "1").([]any)
			if len(got) != len(want) {
				t.Fatalf("%s: got %v, want %v", when, got, want)
			}
			for i := range want {
				if i == 1 {
					if ttl, _ := got[1].(int64); ttl <= 0 || ttl > 60000 {
						t.Fatalf("%s: ttl %v", when, got[1])
					}
					continue
				}
				if got[i] != want[i] {
					t.Fatalf("%s: got %v, want %v", when, got, want)
				}
			}
		}
		check("free", []any{int64(0)})
		b.Client.HSet(ctx, "lock:leader", "grant", "owner-a:5", "value", "old")
		check("a free lock beside an old leader key", []any{int64(0)})
		b.Client.Set(ctx, "lock", "owner-b:6*", time.Minute)
		check("another grant beside an old leader key", []any{int64(1), nil})
		b.Client.Set(ctx, "lock", "owner-b", time.Minute)
		check("an efficiency grant", []any{int64(1), nil})
		b.Client.Set(ctx, "lock", "owner-a:1795974129470711*", time.Minute)
		b.Client.HSet(ctx, "lock:leader", "grant", "owner-a:1795974129470711", "value", "")
		check("the leader, marked", []any{int64(2), nil, "1795974129470711", ""})
		got, _ := e.run(scripts.ElectionLeader, "0").([]any)
		if len(got) != 3 || got[2] != "1795974129470711" {
			t.Fatalf("without the value: got %v", got)
		}
	})
}

// TestElectionResign: a term that ended clears its own leader key and no
// other, and publishes a vacancy only when nobody holds the lock.
func TestElectionResign(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		e := newElection(t, b)
		ctx := t.Context()
		const grant = "owner-a:7"
		b.Client.HSet(ctx, "lock:leader", "grant", "owner-b:8", "value", "b")
		b.Client.Set(ctx, "lock", "owner-b:8", time.Minute)
		if got := e.run(scripts.ElectionResign, grant, electionChannel); got != int64(0) {
			t.Fatalf("resign while a successor holds the lock: got %v, want 0", got)
		}
		if v := b.Client.HGet(ctx, "lock:leader", "grant").Val(); v != "owner-b:8" {
			t.Fatalf("resign cleared the successor's leader key: %q", v)
		}
		b.Client.Del(ctx, "lock")
		if got := e.run(scripts.ElectionResign, grant, electionChannel); got != int64(1) {
			t.Fatalf("resign of a free lock: got %v, want 1", got)
		}
		if m := e.heard(); m != "vacant 7" {
			t.Fatalf("notice: got %q, want %q", m, "vacant 7")
		}
		b.Client.HSet(ctx, "lock:leader", "grant", grant, "value", "a")
		b.Client.Set(ctx, "lock", grant, time.Minute) // its release failed
		if got := e.run(scripts.ElectionResign, grant, electionChannel); got != int64(0) {
			t.Fatalf("resign while still holding the lock: got %v, want 0", got)
		}
		if n := b.Client.Exists(ctx, "lock:leader").Val(); n != 0 {
			t.Fatal("resign left its own leader key")
		}
	})
}

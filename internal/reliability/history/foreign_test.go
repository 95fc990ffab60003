package history_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
	"github.com/redis/go-redis/v9"
)

const (
	// foreignCalls Release and Refresh calls with wrong owner ids hit each
	// held key, pipelined foreignBatch at a time.
	foreignCalls = 100_000
	foreignBatch = 2_000
	// foreignHolderTTL is the holder's own ttl: no foreign call may push the
	// key's ttl above it.
	foreignHolderTTL = time.Minute
)

// TestForeignHands holds an efficiency lock and a correctness lease and runs
// 100,000 release and refresh scripts against each key, exactly as the library
// sends them, but with wrong owner ids: near misses of the holder's value (a
// prefix, a suffix, one character changed, the owner id without its token, a
// neighbouring token) and other owners' ids, for an exact release, a release of
// a lost grant by its owner id, a refresh to ten minutes and one to a
// millisecond. Every call must reply -1 ("another owner holds it"); after every
// batch the key must hold the holder's value with a ttl that never grew; at the
// end the holders' own Release must succeed.
//
// It runs on a real redis-server only, in about a second a key: miniredis
// interprets each script in Go and needs over a minute a key under -race.
func TestForeignHands(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	eff := efficiency.New(b.Client)
	t.Cleanup(func() { _ = eff.Close() })
	corr := correctness.New(b.Client, correctness.WithAudit(false))
	t.Cleanup(func() { _ = corr.Close() })
	lock, err := eff.TryObtain(ctx, "foreign-efficiency", foreignHolderTTL)
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	held, err := corr.TryAcquire(ctx, "foreign-correctness", foreignHolderTTL)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	for _, h := range []handle{lock, held} {
		t.Run(h.Key(), func(t *testing.T) { hammer(t, b.Client, h.Key()) })
		if err := h.Release(ctx); err != nil {
			t.Errorf("the holder's own Release of %s after the foreign calls: got %v, want nil", h.Key(), err)
		}
	}
}

// hammer runs the foreign calls against key and checks the key after each
// batch.
func hammer(t *testing.T, client *redis.Client, key string) {
	t.Helper()
	ctx := t.Context()
	value, err := client.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	last := pttl(t, client, key)
	// EVALSHA in a pipeline has no EVAL fallback: load the scripts first.
	for _, s := range []*scripts.Script{scripts.Release, scripts.Refresh} {
		if err := redistest.Script(s).Load(ctx, client).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
	wrong := newForeigner(value)
	succeeded := 0
	for batch := range foreignCalls / foreignBatch {
		pipe := client.Pipeline()
		calls := make([]string, foreignBatch)
		cmds := make([]*redis.Cmd, foreignBatch)
		for i := range cmds {
			calls[i], cmds[i] = wrong.call(ctx, pipe, key, batch*foreignBatch+i)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		for i, cmd := range cmds {
			if found, err := foundOf(cmd); err != nil || found != scripts.LeaseTaken {
				succeeded++
				if succeeded <= 5 {
					t.Errorf("%s: got %v (%v), %v; want another owner holds it", calls[i], cmd.Val(), found, err)
				}
			}
		}
		if got, err := client.Get(ctx, key).Result(); err != nil || got != value {
			t.Fatalf("after batch %d: GET %s: got %q, %v; want the holder's %q", batch, key, got, err, value)
		}
		// Real Redis counts the ttl down; miniredis stands still. Either
		// way it must never grow.
		now := pttl(t, client, key)
		if now > last {
			t.Fatalf("after batch %d: PTTL %s: got %v, want at most %v, the holder's own", batch, key, now, last)
		}
		last = now
	}
	if succeeded > 0 {
		t.Errorf("foreign calls that released or refreshed %s: got %d of %d, want 0", key, succeeded, foreignCalls)
	}
}

func pttl(t *testing.T, client *redis.Client, key string) time.Duration {
	t.Helper()
	d, err := client.PTTL(t.Context(), key).Result()
	if err != nil || d <= 0 {
		t.Fatalf("PTTL %s: got %v, %v; want a positive ttl", key, d, err)
	}
	return d
}

// foreigner makes wrong owner values for one holder's value, "owner" or
// "owner:token".
type foreigner struct {
	value string
	owner string
	token uint64
	rng   *rand.Rand
	ids   *rand.ChaCha8
}

func newForeigner(value string) *foreigner {
	p, _ := scripts.ParseValue(value, true)
	return &foreigner{value: value, owner: p.Owner, token: p.Token, rng: rand.New(rand.NewPCG(7, 11)), ids: rand.NewChaCha8([32]byte{7})}
}

// call queues the n-th foreign call on pipe, and describes it.
func (f *foreigner) call(ctx context.Context, pipe redis.Pipeliner, key string, n int) (string, *redis.Cmd) {
	keys := []string{key, scripts.QueueKey(key), key + ":fence"}
	switch n % 4 {
	case 0:
		v := f.wrongValue()
		return fmt.Sprintf("release %q", v), redistest.Script(scripts.Release).EvalSha(ctx, pipe, keys, v, "0", "", "1")
	case 1:
		// How a Locker releases a grant whose reply was lost: by owner id.
		p := f.wrongOwner() + ":"
		return fmt.Sprintf("release by owner %q", p), redistest.Script(scripts.Release).EvalSha(ctx, pipe, keys, p, "1", "", "1")
	case 2:
		v := f.wrongValue()
		return fmt.Sprintf("refresh %q to 10m", v), redistest.Script(scripts.Refresh).EvalSha(ctx, pipe, keys[:1], v, (10 * time.Minute).Milliseconds())
	default:
		v := f.wrongValue()
		return fmt.Sprintf("refresh %q to 1ms", v), redistest.Script(scripts.Refresh).EvalSha(ctx, pipe, keys[:1], v, 1)
	}
}

// wrongValue returns a value that is not the holder's: mostly a near miss
// of it, sometimes another owner's.
func (f *foreigner) wrongValue() string {
	v := f.value
	for v == f.value {
		switch f.rng.IntN(10) {
		case 0:
			v = ""
		case 1:
			v = f.value[:f.rng.IntN(len(f.value))] // a proper prefix
		case 2:
			v = f.value + string(f.value[f.rng.IntN(len(f.value))])
		case 3:
			v = flip(f.value, f.rng.IntN(len(f.value)))
		case 4:
			v = f.owner + ":" + strconv.FormatUint(f.token+1, 10)
		case 5:
			v = f.owner + ":" + strconv.FormatUint(f.token-1, 10)
		case 6:
			v = f.wrongOwner() + ":" + strconv.FormatUint(f.token, 10)
		case 7:
			v = f.owner + ":"
		default:
			v = f.wrongOwner()
		}
	}
	return v
}

// wrongOwner returns an owner id, as the Lockers draw them, that is not the
// holder's: a fresh one, or the holder's with one character changed.
func (f *foreigner) wrongOwner() string {
	if f.rng.IntN(2) == 0 {
		return flip(f.owner, f.rng.IntN(len(f.owner)))
	}
	for {
		// An owner id is 16 random bytes in unpadded base64url.
		var b [16]byte
		_, _ = f.ids.Read(b[:]) // ChaCha8 never fails to read
		if o := base64.RawURLEncoding.EncodeToString(b[:]); o != f.owner {
			return o
		}
	}
}

// flip changes the byte at i of s to another character of the owner id
// alphabet.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// handle is what a holder can do with a lease of either kind.
type handle interface {
	Key() string
	Release(context.Context) error
	Refresh(context.Context, time.Duration) error
}

// TestForeignHandsStaleLeases goes through the library's own Release and
// Refresh: it collects leases on one key that expired and were granted again,
// 100 times, so that every old *Lock or *Lease is bound to the key with an
// owner id that is not the holder's. Each old one's Release and Refresh (to
// ten minutes and to a millisecond) must return ErrNotHeld and leave the
// holder's value and ttl alone.
//
// It runs on miniredis, where a lease expires at once when the test moves
// time: on a real server each expiry costs a real ttl, and the 100,000 calls
// of TestForeignHands already run there, as the scripts these methods send.
// Since only the test moves miniredis's clock, the ttl can be long: no round
// trip on a loaded machine comes near it, so no grant comes back late.
func TestForeignHandsStaleLeases(t *testing.T) {
	const ttl = foreignHolderTTL / 2
	b := redistest.Mini(t)
	eff := efficiency.New(b.Client)
	t.Cleanup(func() { _ = eff.Close() })
	corr := correctness.New(b.Client, correctness.WithAudit(false))
	t.Cleanup(func() { _ = corr.Close() })
	kinds := []struct {
		name    string
		acquire func(ctx context.Context, name string, ttl time.Duration) (handle, error)
		notHeld error
	}{
		{"efficiency", func(ctx context.Context, name string, ttl time.Duration) (handle, error) {
			return eff.TryObtain(ctx, name, ttl)
		}, efficiency.ErrNotHeld},
		{"correctness", func(ctx context.Context, name string, ttl time.Duration) (handle, error) {
			return corr.TryAcquire(ctx, name, ttl)
		}, correctness.ErrNotHeld},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := t.Context()
			name := "stale-" + kind.name
			var stale []handle
			for range 100 {
				h, err := kind.acquire(ctx, name, ttl)
				if err != nil {
					t.Fatalf("acquire after the last lease expired: %v", err)
				}
				stale = append(stale, h)
				b.Pass(2 * ttl)
			}
			holder, err := kind.acquire(ctx, name, foreignHolderTTL)
			if err != nil {
				t.Fatalf("acquire of the holder: %v", err)
			}
			value, err := b.Client.Get(ctx, holder.Key()).Result()
			if err != nil {
				t.Fatalf("GET %s: %v", holder.Key(), err)
			}
			for i, h := range stale {
				for _, call := range []struct {
					name string
					do   func() error
				}{
					{"Release", func() error { return h.Release(ctx) }},
					{"Refresh(10m)", func() error { return h.Refresh(ctx, 10*time.Minute) }},
					{"Refresh(1ms)", func() error { return h.Refresh(ctx, time.Millisecond) }},
				} {
					if err := call.do(); !errors.Is(err, kind.notHeld) {
						t.Fatalf("stale lease %d: %s: got %v, want %v", i, call.name, err, kind.notHeld)
					}
				}
			}
			if got, err := b.Client.Get(ctx, holder.Key()).Result(); err != nil || got != value {
				t.Errorf("GET %s: got %q, %v; want the holder's %q", holder.Key(), got, err, value)
			}
			if got := pttl(t, b.Client, holder.Key()); got > foreignHolderTTL {
				t.Errorf("PTTL %s: got %v, want at most %v, the holder's own", holder.Key(), got, foreignHolderTTL)
			}
			if err := holder.Release(ctx); err != nil {
				t.Errorf("the holder's own Release: got %v, want nil", err)
			}
		})
	}
}

// foundOf is what a release or refresh found of the caller's lease, read
// with the protocol's readers: a release replies a string, a refresh a code.
func foundOf(cmd *redis.Cmd) (scripts.LeaseState, error) {
	v, err := cmd.Result()
	if err != nil {
		return 0, err
	}
	if _, release := v.(string); release {
		e, err := scripts.ReadEnd(v)
		return e.Lease, err
	}
	r, err := scripts.ReadRefresh(v)
	return r.Lease, err
}

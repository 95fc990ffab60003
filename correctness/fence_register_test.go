package correctness_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

func TestRegisterFences(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		reg := correctness.NewRegister(b.Client)
		if v, tok, err := reg.Read(ctx, "account"); v != nil || tok != 0 || err != nil {
			t.Fatalf("Read of a new resource: got %q, %d, %v, want nil, 0, nil", v, tok, err)
		}
		steps := []struct {
			token uint64
			value string
			stale bool
		}{
			{34, "B", false},
			{34, "B again", false}, // the same grant writing twice
			{33, "A", true},
			{1_795_974_129_470_711, "clock-floor token", false},
			{1_795_974_129_470_710, "one below", true},
		}
		want, wantTok := "", uint64(0)
		for _, s := range steps {
			err := reg.Write(ctx, "account", s.token, []byte(s.value))
			if s.stale {
				var stale *correctness.StaleTokenError
				if !errors.As(err, &stale) || !errors.Is(err, correctness.ErrStaleToken) {
					t.Fatalf("Write(%d): got %v, want a *StaleTokenError", s.token, err)
				}
				if stale.Token != s.token || stale.Highest != wantTok {
					t.Fatalf("Write(%d): got Token %d Highest %d, want %d and %d", s.token, stale.Token, stale.Highest, s.token, wantTok)
				}
			} else {
				if err != nil {
					t.Fatalf("Write(%d): %v", s.token, err)
				}
				want, wantTok = s.value, s.token
			}
			v, tok, err := reg.Read(ctx, "account")
			if err != nil || string(v) != want || tok != wantTok {
				t.Fatalf("after Write(%d): Read got %q, %d, %v, want %q, %d", s.token, v, tok, err, want, wantTok)
			}
		}
	})
}

func TestRegisterConcurrentWriters(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		reg := correctness.NewRegister(b.Client)
		const writers, writes = 32, 50
		type result struct {
			token    uint64
			accepted bool
			highest  uint64
		}
		results := make(chan result, writers*writes)
		errs := make(chan error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range writes {
					token := uint64(rand.IntN(1000) + 1)
					err := reg.Write(ctx, "shared", token, fmt.Appendf(nil, "%d/%d/%d", w, i, token))
					var stale *correctness.StaleTokenError
					switch {
					case err == nil:
						results <- result{token: token, accepted: true}
					case errors.As(err, &stale):
						results <- result{token: token, highest: stale.Highest}
					default:
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(results)
		close(errs)
		for err := range errs {
			t.Fatalf("Write: %v", err)
		}
		var most uint64
		for r := range results {
			most = max(most, r.token)
			if !r.accepted && r.highest <= r.token {
				t.Errorf("token %d rejected with highest %d: only an older token may be rejected", r.token, r.highest)
			}
		}
		v, tok, err := reg.Read(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		if tok != most {
			t.Fatalf("final token: got %d, want the highest written, %d", tok, most)
		}
		var w, i int
		var vt uint64
		if _, err := fmt.Sscanf(string(v), "%d/%d/%d", &w, &i, &vt); err != nil || vt != most {
			t.Fatalf("final value %q: want one written with token %d", v, most)
		}
	})
}

// TestRegisterClaimAFirst is the read-modify-write story: A claims and reads,
// pauses; B claims (a newer token) and reads the same value. A's write must
// be refused, though B has not written yet, and B's accepted.
func TestRegisterClaimAFirst(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		reg := correctness.NewRegister(b.Client)
		if err := reg.Write(ctx, "counter", 10, []byte("41")); err != nil {
			t.Fatal(err)
		}
		const tA, tB = 33, 34
		v, writer, err := reg.Claim(ctx, "counter", tA)
		if err != nil || string(v) != "41" || writer != 10 {
			t.Fatalf("A's claim: got %q, %d, %v, want %q, 10, nil", v, writer, err, "41")
		}
		v, writer, err = reg.Claim(ctx, "counter", tB)
		if err != nil || string(v) != "41" || writer != 10 {
			t.Fatalf("B's claim: got %q, %d, %v, want %q, 10, nil", v, writer, err, "41")
		}
		err = reg.Write(ctx, "counter", tA, []byte("42 by A"))
		var stale *correctness.StaleTokenError
		if !errors.As(err, &stale) || stale.Token != tA || stale.Highest != tB {
			t.Fatalf("A's write after B's claim: got %v, want a *StaleTokenError %d < %d", err, tA, tB)
		}
		if _, _, err := reg.Claim(ctx, "counter", tA); !errors.As(err, &stale) || stale.Highest != tB {
			t.Fatalf("A's claim again: got %v, want a *StaleTokenError naming %d", err, tB)
		}
		if err := reg.Write(ctx, "counter", tB, []byte("42 by B")); err != nil {
			t.Fatalf("B's write: %v", err)
		}
		if v, tok, err := reg.Read(ctx, "counter"); err != nil || string(v) != "42 by B" || tok != tB {
			t.Fatalf("Read: got %q, %d, %v, want %q, %d", v, tok, err, "42 by B", tB)
		}
	})
}

func TestRegisterClaimOfANewResource(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		reg := correctness.NewRegister(b.Client)
		v, writer, err := reg.Claim(t.Context(), "fresh", 5)
		if v != nil || writer != 0 || err != nil {
			t.Fatalf("Claim: got %q, %d, %v, want nil, 0, nil", v, writer, err)
		}
		// A claim is not a write: Read still reports nothing written.
		if v, tok, err := reg.Read(t.Context(), "fresh"); v != nil || tok != 0 || err != nil {
			t.Fatalf("Read after a claim: got %q, %d, %v, want nil, 0, nil", v, tok, err)
		}
		if err := reg.Write(t.Context(), "fresh", 4, []byte("x")); !errors.Is(err, correctness.ErrStaleToken) {
			t.Fatalf("Write below the claim: got %v, want ErrStaleToken", err)
		}
	})
}

// TestRegisterRefusesForgedTokens: with the clock floor on, a token more than
// an hour ahead of the server clock is refused by Write and Claim, changes
// nothing, and honest holders go on; with it off, the register takes it.
func TestRegisterRefusesForgedTokens(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		now := uint64(b.Client.Time(ctx).Val().UnixMicro())
		honest := now - 1
		reg := correctness.NewRegister(b.Client)
		if err := reg.Write(ctx, "acct", honest, []byte("honest")); err != nil {
			t.Fatal(err)
		}
		for _, forged := range []uint64{math.MaxUint64, now + uint64(2*time.Hour/time.Microsecond)} {
			err := reg.Write(ctx, "acct", forged, []byte("forged"))
			if !errors.Is(err, correctness.ErrInvalidToken) || !strings.Contains(err.Error(), "more than an hour ahead of the server clock") {
				t.Fatalf("Write(%d): got %v, want ErrInvalidToken naming the clock ceiling", forged, err)
			}
			if _, _, err := reg.Claim(ctx, "acct", forged); !errors.Is(err, correctness.ErrInvalidToken) {
				t.Fatalf("Claim(%d): got %v, want ErrInvalidToken", forged, err)
			}
		}
		if err := reg.Write(ctx, "acct", honest+1, []byte("next holder")); err != nil {
			t.Fatalf("an honest write after the forged ones: %v", err)
		}
		open := correctness.NewRegister(b.Client, correctness.WithClockFloor(false))
		if err := open.Write(ctx, "acct", math.MaxUint64, []byte("forged")); err != nil {
			t.Fatalf("WithClockFloor(false): got %v, want the write accepted", err)
		}
		if err := reg.Write(ctx, "acct", honest+2, []byte("locked out")); !errors.Is(err, correctness.ErrStaleToken) {
			t.Fatalf("after a forged write: got %v, want ErrStaleToken", err)
		}
	})
}

// TestRegisterRefusesCorruptFields: a register whose 'token' or 'claimed'
// field holds no token fails closed: Write and Claim, with an old token or
// a clock-floor one, get ErrInvalidToken naming the key and the field, and
// change nothing.
func TestRegisterRefusesCorruptFields(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		reg := correctness.NewRegister(b.Client)
		const key = "leasekit:{acct}:register"
		for _, field := range []string{"token", "claimed"} {
			for _, token := range []uint64{5, uint64(b.Client.Time(ctx).Val().UnixMicro())} {
				for _, op := range []struct {
					name string
					run  func() error
				}{
					{"Write", func() error { return reg.Write(ctx, "acct", token, []byte("new")) }},
					{"Claim", func() error { _, _, err := reg.Claim(ctx, "acct", token); return err }},
				} {
					b.Client.Del(ctx, key)
					b.Client.HSet(ctx, key, field, "garbage", "value", "old")
					err := op.run()
					if !errors.Is(err, correctness.ErrInvalidToken) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), `field `+field+` holds "garbage"`) {
						t.Errorf("%s(%d) over %s \"garbage\": got %v, want ErrInvalidToken naming %s and the field", op.name, token, field, err, key)
					}
					if got := b.Client.HGetAll(ctx, key).Val(); len(got) != 2 || got[field] != "garbage" || got["value"] != "old" {
						t.Errorf("%s(%d) over %s \"garbage\": the register is now %v", op.name, token, field, got)
					}
				}
			}
		}
	})
}

func TestRegisterClaimInput(t *testing.T) {
	reg := correctness.NewRegister(redistest.Mini(t).Client)
	if _, _, err := reg.Claim(t.Context(), "", 1); !errors.Is(err, correctness.ErrInvalidKey) {
		t.Errorf("empty resource: got %v, want ErrInvalidKey", err)
	}
	if _, _, err := reg.Claim(t.Context(), "r", 0); !errors.Is(err, correctness.ErrInvalidToken) {
		t.Errorf("token 0: got %v, want ErrInvalidToken", err)
	}
	b := redistest.Mini(t)
	b.Client.Set(t.Context(), "leasekit:{r}:register", "a string", 0)
	_, _, err := correctness.NewRegister(b.Client).Claim(t.Context(), "r", 1)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "leasekit:{r}:register") {
		t.Errorf("a key of another type: got %v, want WRONGTYPE naming the key", err)
	}
	_, _, err = correctness.NewRegister(b.Client).Read(t.Context(), "r")
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || !strings.Contains(err.Error(), "leasekit:{r}:register") {
		t.Errorf("Read of a key of another type: got %v, want WRONGTYPE naming the key", err)
	}
}

// BenchmarkRegisterServerTime reports what the Register's operations cost
// the real redis-server, in µs of server time per op (INFO commandstats:
// usec of the op's one command, EVALSHA or HMGET, over its calls), with the
// clock ceiling on, on a register holding a 16-byte value. A holder's claim
// draws a new token; its write then carries the same token, which the
// ceiling does not check again (the claim before it is run as EVAL, out of
// the EVALSHA count); a write with a new token is the old Write alone.
//
//	LEASEKIT_REQUIRE_REDIS=1 go test -run '^$' -bench RegisterServerTime -count 5 ./correctness
func BenchmarkRegisterServerTime(b *testing.B) {
	be := redistest.Real(b)
	ctx := b.Context()
	reg := correctness.NewRegister(be.Client)
	value := []byte("0123456789abcdef")
	token := uint64(time.Now().UnixMicro())
	claimByEval := func(b *testing.B) {
		b.StopTimer()
		token++
		err := redistest.Script(scripts.RegisterClaim).Eval(ctx, be.Client, []string{"leasekit:{bench}:register"}, strconv.FormatUint(token, 10), "c").Err()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	ops := []struct {
		name, command string
		op            func(b *testing.B) error
	}{
		{"claim", "evalsha", func(*testing.B) error { token++; _, _, err := reg.Claim(ctx, "bench", token); return err }},
		{"write-after-claim", "evalsha", func(b *testing.B) error { claimByEval(b); return reg.Write(ctx, "bench", token, value) }},
		{"write-new-token", "evalsha", func(*testing.B) error { token++; return reg.Write(ctx, "bench", token, value) }},
		{"read", "hmget", func(*testing.B) error { _, _, err := reg.Read(ctx, "bench"); return err }},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			if err := o.op(b); err != nil { // loads the script
				b.Fatal(err)
			}
			if err := be.Client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := o.op(b); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(serverUsecPerCall(b, be, o.command), "server-µs/op")
		})
	}
}

// serverUsecPerCall reads usec_per_call of command from INFO commandstats.
func serverUsecPerCall(b *testing.B, be *redistest.Backend, command string) float64 {
	b.Helper()
	v, ok := commandStat(b, be, "usec_per_call")[command]
	if !ok {
		b.Fatalf("INFO commandstats has no usec_per_call for %s", command)
	}
	return v
}

// commandStat reads one field (calls, usec_per_call, ...) of every command
// in INFO commandstats, by the command's name.
func commandStat(b *testing.B, be *redistest.Backend, field string) map[string]float64 {
	b.Helper()
	info, err := be.Client.Info(b.Context(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	stats := make(map[string]float64)
	for l := range strings.Lines(info) {
		command, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "cmdstat_"), ":")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(f, field+"="); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				stats[command] = n
			}
		}
	}
	return stats
}

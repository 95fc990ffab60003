package scripts_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// The scripts run on gopher-lua in miniredis and on Lua 5.1 in Redis, which
// differ (number formatting above all): every case runs on both.

func TestCompareAndChange(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		keys := []string{"lock"}
		releaseKeys := []string{"lock", "lock:queue", "lock:fence"}
		b.Client.Set(ctx, "lock", "owner-a", time.Minute)
		cases := []struct {
			name        string
			run         func(owner string) (int64, error)
			other, gone int64 // the replies when another owner holds it, and when the key is gone
		}{
			{"refresh", func(o string) (int64, error) {
				return redistest.Script(scripts.Refresh).Run(ctx, b.Client, keys, o, 3600000).Int64()
			}, -1, 0},
			{"pttl", func(o string) (int64, error) {
				return redistest.Script(scripts.PTTL).Run(ctx, b.Client, keys, o).Int64()
			}, -3, -2},
			{"release", func(o string) (int64, error) {
				return endCode(redistest.Script(scripts.Release).Run(ctx, b.Client, releaseKeys, o, "0", "", "0"))
			}, -1, 0},
		}
		for _, tc := range cases {
			got, err := tc.run("owner-b")
			if err != nil || got != tc.other {
				t.Errorf("%s by a non-owner: got %d, %v, want %d", tc.name, got, err, tc.other)
			}
			if ttl := b.Client.PTTL(ctx, "lock").Val(); ttl <= 0 || ttl > time.Minute {
				t.Fatalf("%s by a non-owner changed the ttl to %v", tc.name, ttl)
			}
		}
		if got, _ := redistest.Script(scripts.Refresh).Run(ctx, b.Client, keys, "owner-a", 3600000).Int64(); got != 1 {
			t.Errorf("refresh by the owner: got %d, want 1", got)
		}
		if got, _ := redistest.Script(scripts.PTTL).Run(ctx, b.Client, keys, "owner-a").Int64(); got <= 60000 {
			t.Errorf("pttl by the owner after refresh: got %d, want over 60000", got)
		}
		for _, prefix := range []string{"owner-b:", "owner-", "", ":"} {
			if got, _ := endCode(redistest.Script(scripts.Release).Run(ctx, b.Client, releaseKeys, prefix, "1", "", "0")); got != -1 {
				t.Errorf("release by prefix %q of %q: got %d, want -1", prefix, "owner-a", got)
			}
		}
		b.Client.Set(ctx, "lock", ":33", time.Minute)
		if got, _ := endCode(redistest.Script(scripts.Release).Run(ctx, b.Client, releaseKeys, ":", "1", "", "0")); got != -1 {
			t.Errorf("release by the empty owner prefix %q of %q: got %d, want -1", ":", ":33", got)
		}
		b.Client.Set(ctx, "lock", "owner-a:33", time.Minute)
		if got, _ := endCode(redistest.Script(scripts.Release).Run(ctx, b.Client, releaseKeys, "owner-a:", "1", "", "0")); got != 1 {
			t.Errorf("release by a matching prefix: got %d, want 1", got)
		}
		if b.Client.Exists(ctx, "lock").Val() != 0 {
			t.Errorf("the key survived its release")
		}
		for _, tc := range cases {
			if got, err := tc.run("owner-a"); err != nil || got != tc.gone {
				t.Errorf("%s of a key that is gone: got %d, %v, want %d", tc.name, got, err, tc.gone)
			}
		}
	})
}

func fencedAcquire(t *testing.T, b *redistest.Backend, owner, kind string) any {
	t.Helper()
	reply, err := fencedResult(redistest.Script(scripts.FencedAcquire).Run(t.Context(), b.Client, []string{"lock", "lock:queue", "lock:fence"}, owner, 60000, kind))
	if err != nil {
		t.Fatalf("fenced acquire: %v", err)
	}
	return reply
}

func TestFencedAcquireTokens(t *testing.T) {
	// A minute ahead of the clock, ending in 0: within the hour a counter
	// may run ahead (many grants in one µs, a clock set back a little).
	ahead := strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro()/10*10, 10)
	cases := []struct {
		name    string
		counter string // "" for none
		kind    string // 'f': the counter alone; 'c': with the clock floor
		want    func(token string) bool
		explain string
	}{
		{"first grant", "", "f", func(s string) bool { return s == "1" }, "1"},
		{"16 digits stay exact", "1795974129470711", "f", func(s string) bool { return s == "1795974129470712" }, "1795974129470712, not %.14g's 1.7959741294707e+15"},
		{"beyond 2^53 stays exact", "123456789012345678", "f", func(s string) bool { return s == "123456789012345679" }, "123456789012345679"},
		{"counter above the clock wins", ahead, "c", func(s string) bool { return s == ahead[:15]+"1" }, "the counter + 1"},
		{"clock floor lifts a small counter", "5", "c", func(s string) bool {
			n, err := strconv.ParseUint(s, 10, 64)
			return err == nil && n > uint64(time.Now().Add(-time.Hour).UnixMicro()) && len(s) == 16
		}, "the server clock in µs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				if tc.counter != "" {
					b.Client.Set(t.Context(), "lock:fence", tc.counter, 0)
				}
				reply := fencedAcquire(t, b, "owner-a", tc.kind)
				token, ok := reply.(string)
				if !ok || !tc.want(token) {
					t.Fatalf("got token %v (%T), want %s", reply, reply, tc.explain)
				}
				if c := b.Client.Get(t.Context(), "lock:fence").Val(); c != token {
					t.Fatalf("counter: got %q, want it to hold the token %q", c, token)
				}
				if v := b.Client.Get(t.Context(), "lock").Val(); v != "owner-a:"+token {
					t.Fatalf("lock value: got %q, want %q", v, "owner-a:"+token)
				}
				// A client retry after a lost reply gets the same token back.
				if again := fencedAcquire(t, b, "owner-a", tc.kind); again != token {
					t.Fatalf("retry by the same owner: got %v, want the same token %s", again, token)
				}
				if c := b.Client.Get(t.Context(), "lock:fence").Val(); c != token {
					t.Fatalf("counter after the retry: got %q, want %q: a retry must not draw a second token", c, token)
				}
				ttl, ok := fencedAcquire(t, b, "owner-b", tc.kind).(int64)
				if !ok || ttl <= 0 || ttl > 60000 {
					t.Fatalf("another owner: got %v, want the holder's ttl", ttl)
				}
				c, v := b.Client.Get(t.Context(), "lock:fence").Val(), b.Client.Get(t.Context(), "lock").Val()
				if c != token || v != "owner-a:"+token {
					t.Fatalf("after another owner's try: counter %q, lock %q, want %q and %q unchanged", c, v, token, "owner-a:"+token)
				}
			})
		})
	}
}

// TestFencedAcquireRefusesACounterAheadOfTheClock: with the clock floor, a
// counter more than an hour ahead of the server clock (the clock ran fast
// and was set back, or the value was forged) draws no token, since every
// fence with the clock ceiling would refuse it: the acquire fails with
// BADFENCE, changes nothing, and says to repair or delete the counter.
// Without the clock floor the counter alone counts, as the Register's check
// is off then too.
func TestFencedAcquireRefusesACounterAheadOfTheClock(t *testing.T) {
	ahead := strconv.FormatInt(time.Now().Add(2*time.Hour).UnixMicro(), 10)
	for _, kind := range []string{"c", "t"} {
		t.Run(kind, func(t *testing.T) {
			redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
				ctx := t.Context()
				b.Client.Set(ctx, "lock:fence", ahead, 0)
				_, err := fencedResult(redistest.Script(scripts.FencedAcquire).Run(ctx, b.Client, lockKeys, "owner-a", 60000, kind))
				if err == nil || !strings.HasPrefix(err.Error(), "BADFENCE") || !strings.Contains(err.Error(), "more than an hour ahead") ||
					!strings.Contains(err.Error(), "repair or delete it") {
					t.Fatalf("acquire with the counter 2 h ahead: got %v, want BADFENCE saying it is more than an hour ahead", err)
				}
				if n := b.Client.Exists(ctx, "lock").Val(); n != 0 {
					t.Fatalf("the refused acquire left the lock key")
				}
				if c := b.Client.Get(ctx, "lock:fence").Val(); c != ahead {
					t.Fatalf("counter after the refusal: got %s, want %s unchanged", c, ahead)
				}
			})
		})
	}
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		b.Client.Set(t.Context(), "lock:fence", ahead, 0)
		token, err := fencedText(redistest.Script(scripts.FencedAcquire).Run(t.Context(), b.Client, lockKeys, "owner-a", 60000, "f"))
		if n, _ := strconv.ParseInt(ahead, 10, 64); err != nil || token != strconv.FormatInt(n+1, 10) {
			t.Fatalf("acquire without the clock floor: got %q, %v, want the counter + 1", token, err)
		}
	})
}

// TestRegisterFence runs register_write and register_claim in turn on one
// register: each step sees what the steps before it left.
func TestRegisterFence(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		// Tokens near the server clock in µs, as the clock floor draws them.
		now := b.Client.Time(ctx).Val().UnixMicro()
		tok := func(d time.Duration) string { return strconv.FormatInt(now+d.Microseconds(), 10) }
		write := func(token, check string) any {
			return redistest.Script(scripts.RegisterWrite).Run(ctx, b.Client, []string{"reg"}, token, "v"+token, check).Val()
		}
		claim := func(token, check string) any {
			return redistest.Script(scripts.RegisterClaim).Run(ctx, b.Client, []string{"reg"}, token, check).Val()
		}
		type reply = []any
		steps := []struct {
			name string
			run  func(token, check string) any
			tok  string
			chk  string
			want any // nil: refused as ahead of the ceiling
		}{
			{"claim of a new register", claim, "9", "c", reply{"ok", "0"}},
			{"write by the claimer", write, "9", "c", reply{"ok"}},
			{"write again: the same grant", write, "9", "c", reply{"ok"}},
			{"claim by a newer token", claim, "10", "c", reply{"ok", "9", "v9"}}, // longer is larger, though "10" < "9" as text
			{"write by the token it superseded", write, "9", "c", reply{"stale", "10"}},
			{"claim by the token it superseded", claim, "9", "c", reply{"stale", "10"}},
			{"write by the newer claimer", write, "10", "c", reply{"ok"}},
			{"a clock-floor token", claim, tok(0), "c", reply{"ok", "10", "v10"}},
			{"59 minutes ahead", write, tok(59 * time.Minute), "c", reply{"ok"}},
			{"61 minutes ahead", write, tok(61 * time.Minute), "c", nil},
			{"61 minutes ahead, claimed", claim, tok(61 * time.Minute), "c", nil},
			{"the largest uint64", claim, "18446744073709551615", "c", nil},
			{"one below the highest", claim, tok(59*time.Minute - time.Microsecond), "c", reply{"stale", tok(59 * time.Minute)}},
			{"61 minutes ahead, no ceiling", claim, tok(61 * time.Minute), "", reply{"ok", tok(59 * time.Minute), "v" + tok(59*time.Minute)}},
			{"written below a claim", write, tok(60 * time.Minute), "", reply{"stale", tok(61 * time.Minute)}},
			// A token equal to the highest is the same grant: not checked
			// again.
			{"the claimer writes", write, tok(61 * time.Minute), "c", reply{"ok"}},
		}
		for _, s := range steps {
			text, _ := s.run(s.tok, s.chk).(string)
			var got reply // its fields, the last the rest
			for _, f := range strings.SplitN(text, " ", 3) {
				got = append(got, f)
			}
			if s.want == nil { // refused as ahead of the ceiling
				r := got
				if len(r) != 2 || r[0] != "ahead" || !aheadBy(r[1], now, time.Hour) {
					t.Fatalf("%s: got %v, want [ahead <server clock + 1h in µs>]", s.name, got)
				}
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(s.want) {
				t.Fatalf("%s (token %s): got %v, want %v", s.name, s.tok, got, s.want)
			}
		}
		want := map[string]string{"token": tok(61 * time.Minute), "value": "v" + tok(61*time.Minute), "claimed": tok(61 * time.Minute)}
		if got := b.Client.HGetAll(ctx, "reg").Val(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("register: got %v, want %v", got, want)
		}
	})
}

// aheadBy reports whether the ceiling in a reply is the clock now plus d,
// within the seconds a test can take.
func aheadBy(ceiling any, now int64, d time.Duration) bool {
	s, _ := ceiling.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	off := time.Duration(n-now) * time.Microsecond
	return err == nil && off >= d && off < d+time.Minute
}

// TestRegisterFenceReadsTheOldLayout: a register written before claims
// existed (only 'token' and 'value') fences as it did.
func TestRegisterFenceReadsTheOldLayout(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		b.Client.HSet(ctx, "reg", "token", "1795974129470712", "value", "old")
		for _, tc := range []struct {
			s    *scripts.Script
			args []any
			want string
		}{
			{scripts.RegisterWrite, []any{"1795974129470711", "x", ""}, "stale 1795974129470712"},
			{scripts.RegisterClaim, []any{"1795974129470711", ""}, "stale 1795974129470712"},
			{scripts.RegisterClaim, []any{"1795974129470712", ""}, "ok 1795974129470712 old"},
		} {
			if got := fmt.Sprint(redistest.Script(tc.s).Run(ctx, b.Client, []string{"reg"}, tc.args...).Val()); got != tc.want {
				t.Fatalf("%v: got %s, want %s", tc.args, got, tc.want)
			}
		}
	})
}

// TestRegisterFenceRefusesCorruptFields: a register whose 'token' or
// 'claimed' holds no token refuses every write and claim, with the field and
// its text, and is left as it was; however the text would compare with the
// token (shorter, longer, equal length).
func TestRegisterFenceRefusesCorruptFields(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		corrupt := []string{"garbage", "x", "", "0", "007", "-1", "1.5", " 7", "1e15",
			"18446744073709551616", "123456789012345678901", strings.Repeat("9", 50)}
		for _, field := range []string{"token", "claimed"} {
			for _, text := range corrupt {
				for _, token := range []string{"5", "1795974129470711"} {
					for _, s := range []struct {
						name string
						run  func() any
					}{
						{"write", func() any {
							return redistest.Script(scripts.RegisterWrite).Run(ctx, b.Client, []string{"reg"}, token, "v", "c").Val()
						}},
						{"claim", func() any {
							return redistest.Script(scripts.RegisterClaim).Run(ctx, b.Client, []string{"reg"}, token, "c").Val()
						}},
					} {
						b.Client.Del(ctx, "reg")
						b.Client.HSet(ctx, "reg", field, text, "value", "old")
						want := "corrupt " + field + " " + text[:min(len(text), 40)]
						if got := fmt.Sprint(s.run()); got != want {
							t.Errorf("%s with token %s over %s %q: got %s, want %s", s.name, token, field, text, got, want)
						}
						if got := b.Client.HGetAll(ctx, "reg").Val(); len(got) != 2 || got[field] != text || got["value"] != "old" {
							t.Errorf("%s with token %s over %s %q: the register is now %v", s.name, token, field, text, got)
						}
					}
				}
			}
		}
	})
}

// TestRegisterClaimRetention: with a retention and the ceiling, each claim
// register_claim accepts restarts the key's expiry, and a missing register
// refuses a token below the clock floor (the server clock in µs, less the
// retention, plus an hour and a second) and creates nothing; without the
// ceiling, or without a retention, the key never expires.
func TestRegisterClaimRetention(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		const keep = 24 * time.Hour
		ms := strconv.FormatInt(keep.Milliseconds(), 10)
		now := b.Client.Time(ctx).Val().UnixMicro()
		floor := now - keep.Microseconds() + (time.Hour + time.Second).Microseconds()
		tok := func(us int64) string { return strconv.FormatInt(us, 10) }
		claim := func(key, token string, args ...any) string {
			return fmt.Sprint(redistest.Script(scripts.RegisterClaim).Run(ctx, b.Client, []string{key}, append([]any{token}, args...)...).Val())
		}

		for _, token := range []string{"5", tok(floor - time.Minute.Microseconds())} {
			got := claim("reg", token, "c", ms)
			var f int64
			if _, err := fmt.Sscanf(got, "floor %d", &f); err != nil || f < floor || f > floor+time.Minute.Microseconds() {
				t.Errorf("token %s on a missing register: got %s, want floor %d or up to a minute later", token, got, floor)
			}
			if n := b.Client.Exists(ctx, "reg").Val(); n != 0 {
				t.Errorf("token %s on a missing register: a refused claim created the key", token)
			}
		}
		if got := claim("reg", tok(now), "c", ms); got != "ok 0" {
			t.Fatalf("a clock token on a missing register: got %s, want ok 0 (no value)", got)
		}
		if ttl := b.Client.PTTL(ctx, "reg").Val(); ttl <= 0 || ttl > keep {
			t.Fatalf("after an accepted claim: PTTL %v, want the retention, %v", ttl, keep)
		}
		// Each accepted claim restarts the expiry; a refused one does not.
		for _, s := range []struct {
			after   int64 // the token, past now
			refresh bool
		}{{0, true}, {1, true}, {-1, false}} {
			b.Client.PExpire(ctx, "reg", time.Minute)
			claim("reg", tok(now+s.after), "c", ms)
			if ttl := b.Client.PTTL(ctx, "reg").Val(); (ttl > time.Minute) != s.refresh {
				t.Errorf("claim with token now%+d: PTTL %v, want it restarted to the retention: %v", s.after, ttl, s.refresh)
			}
		}
		for _, c := range []struct {
			name string
			args []any
		}{
			{"no retention", []any{"c", ""}},
			{"no ARGV[3] (a Register's claim)", []any{"c"}},
			{"a retention without the ceiling", []any{"", ms}},
		} {
			if got := claim("other", "5", c.args...); got != "ok 0" {
				t.Errorf("%s: got %s, want the claim accepted, with no floor", c.name, got)
			}
			if ttl := b.Client.PTTL(ctx, "other").Val(); ttl != -1 {
				t.Errorf("%s: PTTL %v, want none", c.name, ttl)
			}
			b.Client.Del(ctx, "other")
		}
	})
}

func TestFencedAcquireRefusesAKeyOfAnotherType(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		b.Client.HSet(t.Context(), "lock", "f", "v")
		_, err := fencedResult(redistest.Script(scripts.FencedAcquire).Run(t.Context(), b.Client, []string{"lock", "lock:queue", "lock:fence"}, "owner-a", 60000, "c"))
		if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("got %v, want WRONGTYPE: a hash must not be taken for a free lock", err)
		}
		if typ := b.Client.Type(t.Context(), "lock").Val(); typ != "hash" {
			t.Fatalf("the key is now a %s", typ)
		}
	})
}

func TestFencedAcquireRefusesACounterOfAnotherType(t *testing.T) {
	for _, kind := range []string{"f", "c", "t"} {
		redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
			b.Client.HSet(t.Context(), "lock:fence", "f", "v")
			_, err := fencedResult(redistest.Script(scripts.FencedAcquire).Run(t.Context(), b.Client, []string{"lock", "lock:queue", "lock:fence"}, "owner-a", 60000, kind))
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Fatalf("kind %s: got %v, want WRONGTYPE: a hash must not be overwritten as a counter", kind, err)
			}
			if typ := b.Client.Type(t.Context(), "lock:fence").Val(); typ != "hash" {
				t.Fatalf("kind %s: the counter key is now a %s", kind, typ)
			}
		})
	}
}

// TestReleaseWakesOnlyMarkedLocks: a release publishes the wake-up for waiters
// that do not queue only when the lock carries the mark that a waiter's
// attempt leaves (wait.lua), so that the release of a lock nobody waited for
// is a GET and a DEL.
func TestReleaseWakesOnlyMarkedLocks(t *testing.T) {
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		keys := []string{"lock", "lock:queue", "lock:fence"}
		ps := b.Client.Subscribe(ctx, "lock:wake")
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		for _, marked := range []bool{false, true} {
			b.Client.Set(ctx, "lock", "owner-a", time.Minute)
			if marked {
				// A waiter that does not queue (entry '') marks the lock.
				reply, err := redistest.Script(scripts.Wait).Run(ctx, b.Client, keys, "owner-b", 60000, "e", "", "", "").Result()
				if err == nil {
					reply = table(t, reply)
				}
				if r, _ := reply.([]any); err != nil || len(r) != 4 || r[0] != int64(0) || r[2] != "" {
					t.Fatalf("wait without an entry: got %v, %v, want [0 ttl '' ''] (not queued)", reply, err)
				}
				if v := lockValue(t, b); v != "owner-a*" {
					t.Fatalf("the waiter left the value %q, want it marked", v)
				}
				if n := b.Client.Exists(ctx, "lock:queue").Val(); n != 0 {
					t.Fatalf("the waiter without an entry made a queue")
				}
			}
			if n, err := endCode(redistest.Script(scripts.Release).Run(ctx, b.Client, keys, "owner-a", "0", "", "0")); err != nil || n != 1 {
				t.Fatalf("release (marked %v): got %d, %v, want 1", marked, n, err)
			}
			if b.Client.Exists(ctx, "lock").Val() != 0 {
				t.Fatalf("release (marked %v) left the key", marked)
			}
		}
		// The first message is the marked lock's release: the first sent none.
		b.Client.Publish(ctx, "lock:wake", "end")
		for _, want := range []string{"", "end"} {
			msg, err := ps.ReceiveMessage(ctx)
			if err != nil || msg.Payload != want {
				t.Fatalf("got %v, %v, want the message %q", msg, err, want)
			}
		}
	})
}

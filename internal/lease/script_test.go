package lease

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/port"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/leasekit/leasekit/scripts"
)

// TestReadOnlyScriptsRunFlagged: a lock's and a semaphore's ttl and Inspect
// run their scripts flagged no-writes on a real server (the flagged
// scripts, and only they, in its cache), and unflagged on miniredis, which
// refuses the flag: once remembered, a call there sends one EVALSHA.
func TestReadOnlyScriptsRunFlagged(t *testing.T) {
	readOnly := []Script{pttlScript, inspectScript, semPTTLScript, semInspectScript}
	redistest.Run(t, func(t *testing.T, b *redistest.Backend) {
		ctx := t.Context()
		if err := b.Client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		c := argvCore(t, b, Config{Kind: "efficiency"})
		h := mustHeld(t)(c.Try(ctx, "flags", time.Minute))
		sem := c.Semaphore("flags-sem", 2)
		p := mustHeld(t)(sem.Try(ctx, time.Minute))
		run := func() {
			t.Helper()
			for _, h := range []*Held{h, p} {
				if _, err := h.TTL(ctx); err != nil {
					t.Fatalf("TTL: %v", err)
				}
			}
			if _, err := c.Inspect(ctx, "flags"); err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if _, err := sem.Inspect(ctx); err != nil {
				t.Fatalf("semaphore Inspect: %v", err)
			}
		}
		run()
		cached := func(s Script) bool {
			t.Helper()
			got, err := b.Client.ScriptExists(ctx, s.hash.(string)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return got[0]
		}
		memory := c.cfg.Conn.(port.Remembering).Memory()
		if b.Mini == nil {
			if memory.NoScriptFlags.Load() {
				t.Fatal("redis-server: the Core remembers the server refused script flags")
			}
			for _, s := range readOnly {
				if !cached(s) || cached(*s.bare) {
					t.Errorf("redis-server: flagged %s cached %v, unflagged %v; want the flagged alone",
						s.hash, cached(s), cached(*s.bare))
				}
			}
			// The server honours the flag: a flagged script that writes is
			// refused.
			writer := script(scripts.NoWrites + "return redis.call('SET', KEYS[1], 'x')")
			_, err := writer.Run(ctx, c.cfg.Conn, []any{"flags-write"})
			if err == nil || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("a flagged script that writes: %v; want it refused as read-only", err)
			}
			return
		}
		if !memory.NoScriptFlags.Load() {
			t.Fatal("miniredis: the Core does not remember that the server refused script flags")
		}
		count := redistest.Count(b.Client)
		if _, err := h.TTL(ctx); err != nil {
			t.Fatal(err)
		}
		if n, total := count.Of("pttl"), count.Total(); n != 1 || total != 1 {
			t.Errorf("miniredis, a TTL once the refusal is remembered made %d round trips, %d of them pttl's; want one", total, n)
		}
		for _, s := range readOnly {
			if cached(s) || !cached(*s.bare) {
				t.Errorf("miniredis: flagged %s cached %v, unflagged %v; want the unflagged alone",
					s.hash, cached(s), cached(*s.bare))
			}
		}
	})
}

// TestFlagRefused tells a server's refusal to compile a shebang line from
// other errors: Redis 6's and miniredis's words for it.
func TestFlagRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{reply("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"), true},
		{reply("ERR Error compiling script (new function): user_script line:1(column:1) near '#':   syntax error "), true},
		{reply("ERR Error compiling script (new function): user_script:3: '=' expected near 'x'"), false},
		{reply("NOSCRIPT No matching script."), false},
		{errors.New("dial: Error compiling script near '#'"), false}, // not the server's
		{nil, false},
	} {
		if got := flagRefused(c.err); got != c.want {
			t.Errorf("flagRefused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

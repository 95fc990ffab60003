package correctness_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

func findings(t *testing.T, l *correctness.Locker) map[string]correctness.Finding {
	t.Helper()
	fs, err := l.Audit(t.Context())
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	m := make(map[string]correctness.Finding)
	for _, f := range fs {
		m[f.Check] = f
	}
	return m
}

func TestAuditMiniredisIsUnverified(t *testing.T) {
	b := redistest.Mini(t)
	got := findings(t, newLocker(t, b))
	for _, check := range []string{"persistence", "eviction", "replication"} {
		if got[check].Status != correctness.StatusUnverified {
			t.Errorf("%s on miniredis: got %v (%s), want could not verify", check, got[check].Status, got[check].Detail)
		}
	}
	for _, check := range []string{"scripting", "clock-floor"} {
		if got[check].Status != correctness.StatusOK {
			t.Errorf("%s on miniredis: got %v (%s), want ok", check, got[check].Status, got[check].Detail)
		}
	}
}

func TestAuditRealServer(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		opts   []correctness.Option
		expect map[string]correctness.Status
	}{
		{"default", nil, nil, map[string]correctness.Status{
			"persistence": correctness.StatusRisk, "eviction": correctness.StatusOK,
			"replication": correctness.StatusOK, "scripting": correctness.StatusOK, "clock-floor": correctness.StatusOK,
		}},
		{"aof always, lru, no floor", []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "allkeys-lru"},
			[]correctness.Option{correctness.WithClockFloor(false)}, map[string]correctness.Status{
				"persistence": correctness.StatusOK, "eviction": correctness.StatusRisk, "clock-floor": correctness.StatusRisk,
			}},
		{"aof everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, nil, map[string]correctness.Status{
			"persistence": correctness.StatusRisk,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t, tc.args...)
			l := correctness.New(s.Client(t), append(tc.opts, correctness.WithLogger(quiet))...)
			defer l.Close()
			got := findings(t, l)
			for check, want := range tc.expect {
				if got[check].Status != want {
					t.Errorf("%s: got %v (%s), want %v", check, got[check].Status, got[check].Detail, want)
				}
			}
		})
	}
}

func TestAuditReplica(t *testing.T) {
	primary := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", primary.Addr[len("127.0.0.1:"):])
	l := correctness.New(primary.Client(t), correctness.WithLogger(quiet))
	defer l.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := findings(t, l)["replication"]
		if got.Status == correctness.StatusRisk {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replication with a connected replica: got %v (%s), want risk", got.Status, got.Detail)
		}
		time.Sleep(20 * time.Millisecond) // the replica connects in the background
	}
	onReplica := correctness.New(replica.Client(t), correctness.WithLogger(quiet))
	defer onReplica.Close()
	if got := findings(t, onReplica)["replication"]; got.Status != correctness.StatusRisk {
		t.Fatalf("audit of a replica: got %v, want risk", got.Status)
	}
}

func TestAuditDeniedByACL(t *testing.T) {
	b := redistest.Real(t)
	ctx := t.Context()
	if err := b.Client.Do(ctx, "ACL", "SETUSER", "nocfg", "on", ">pw", "~*", "&*", "+@all", "-config", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: b.Server.Addr, Username: "nocfg", Password: "pw"})
	defer c.Close()
	l := correctness.New(c, correctness.WithLogger(quiet))
	defer l.Close()
	got := findings(t, l)
	for _, check := range []string{"persistence", "eviction", "replication"} {
		if got[check].Status != correctness.StatusUnverified {
			t.Errorf("%s without CONFIG/INFO: got %v, want could not verify", check, got[check].Status)
		}
	}
}

// serverError is an error reply from Redis, as go-redis types it.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// replyHook replaces the reply of every command called name that is sent in
// a pipeline (the audit's) with err.
type replyHook struct {
	name string
	err  error
}

func (h replyHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h replyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c.Name() == h.name {
				c.SetErr(h.err)
			}
		}
		return err
	}
}

// TestAuditScriptingUnverified: an answer to the scripting probes that is
// neither the expected one nor NOPERM (a proxy that does not know the
// command, say) is "could not verify", never ok.
func TestAuditScriptingUnverified(t *testing.T) {
	for _, name := range []string{"eval", "evalsha"} {
		t.Run(name, func(t *testing.T) {
			b := redistest.Mini(t)
			b.Client.AddHook(replyHook{name, serverError("ERR unknown command '" + name + "'")})
			got := findings(t, newLocker(t, b))["scripting"]
			if got.Status != correctness.StatusUnverified || !strings.Contains(got.Detail, "unknown command") {
				t.Fatalf("scripting: got %v (%s), want could not verify, with the reply", got.Status, got.Detail)
			}
		})
	}
}

// TestAuditWithBadCredentials: a client that Redis will not serve (a wrong
// password, or none where one is required) makes Audit fail with Redis's
// refusal, not report checks it "could not verify".
func TestAuditWithBadCredentials(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "secret")
	for _, tc := range []struct{ password, want string }{{"wrong", "WRONGPASS"}, {"", "NOAUTH"}} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: tc.password})
		l := correctness.New(c, correctness.WithLogger(quiet))
		findings, err := l.Audit(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) || findings != nil {
			t.Errorf("password %q: got %v, %v; want no findings and an error saying %s", tc.password, findings, err, tc.want)
		}
		_ = l.Close()
		_ = c.Close()
	}
}

// recorder is a slog.Handler that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func TestFirstAcquireLogsAudit(t *testing.T) {
	b := redistest.Mini(t)
	rec := &recorder{}
	l := correctness.New(b.Client, correctness.WithLogger(slog.New(rec)))
	defer l.Close()
	for range 3 {
		lease, err := l.TryAcquire(t.Context(), "logged", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		_ = lease.Release(t.Context())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// miniredis: persistence, eviction and replication cannot be verified.
	if len(rec.records) != 3 {
		t.Fatalf("got %d log records over three acquires, want 3 (one per unverified check, once)", len(rec.records))
	}
	for _, r := range rec.records {
		if r.Level != slog.LevelWarn {
			t.Errorf("got level %v, want Warn", r.Level)
		}
	}

	silent := &recorder{}
	off := correctness.New(b.Client, correctness.WithLogger(slog.New(silent)), correctness.WithAudit(false))
	defer off.Close()
	if _, err := off.TryAcquire(t.Context(), "unlogged", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(silent.records) != 0 {
		t.Fatalf("WithAudit(false): got %d log records, want 0", len(silent.records))
	}
}

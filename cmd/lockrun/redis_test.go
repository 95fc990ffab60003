package main

import (
	"maps"
	"net"
	"strings"
	"testing"

	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

func TestRefusedCredentials(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := redistest.Start(t, "--requirepass", "s3cret")
	admin := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "s3cret"})
	t.Cleanup(func() { _ = admin.Close() })
	// A user who may PING but not take a lock.
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "pinger", "on", ">s3cret-pinger", "~*", "+ping", "+hello", "+client").Err(); err != nil {
		t.Fatal(err)
	}
	url := func(userinfo string) string { return "redis://" + userinfo + s.Addr }
	for _, tc := range []struct {
		name   string
		args   []string
		want   int
		stderr string // a part of stderr
	}{
		{"wrong password", []string{"-redis", url(":s3cret-wrong@"), "job", "--", "true"}, exitNoPerm, "refused the credentials"},
		{"wrong user", []string{"-redis", url("nobody:s3cret@"), "job", "--", "true"}, exitNoPerm, "WRONGPASS"},
		{"no password", []string{"-redis", url(""), "job", "--", "true"}, exitNoPerm, "NOAUTH"},
		{"status, wrong password", []string{"-redis", url(":s3cret-wrong@"), "-status", "job"}, exitNoPerm, "refused the credentials"},
		{"user may not lock", []string{"-redis", url("pinger:s3cret-pinger@"), "job", "--", "true"}, exitNoPerm, "refused a command"},
		{"right password", []string{"-redis", url(":s3cret@"), "job", "--", "true"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := h.with(t).run(tc.args...)
			wantCode(t, r, tc.want)
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr: got %q, want it to contain %q", r.stderr, tc.stderr)
			}
			if tc.want != 0 && !strings.Contains(r.stderr, "Redis at "+s.Addr+" refused") {
				t.Errorf("stderr: got %q, want it to say Redis at %s refused", r.stderr, s.Addr)
			}
			if strings.Contains(r.stderr, "s3cret") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
}

// TestRunCostsTheLockAlone: a run that finds the lock free sends what the
// lock needs and nothing else: the connection's HELLO, the acquire (SET NX)
// and the release (EVALSHA, whose script runs GET and DEL), as the server
// counts them (INFO commandstats), with no PING and no error reply
// (go-redis's CLIENT SETINFO and MAINT_NOTIFICATIONS, which Redis 7.0 does
// not know, would be one each). Where the server has a compare-and-delete
// of its own, the release is that command (DELEX, or on Valkey before 9.2
// DELIFEQ); before it, the Locker asks which the server has (COMMAND INFO,
// once per process).
func TestRunCostsTheLockAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	// Where the server has no compare-and-delete, the release is its
	// equivalent in Lua (scripts/del_if_eq.lua: GET and DEL).
	want := map[string]string{"hello": "calls=1", "command|info": "calls=1", "set": "calls=1", "evalsha": "calls=1", "get": "calls=1", "del": "calls=1",
		"total_error_replies": "0"}
	switch {
	case h.client.Do(ctx, "DELEX", "probe", "IFEQ", "v").Err() == nil:
		want = map[string]string{"hello": "calls=1", "command|info": "calls=1", "set": "calls=1", "delex": "calls=1", "total_error_replies": "0"}
	case h.client.Do(ctx, "DELIFEQ", "probe", "v").Err() == nil:
		want = map[string]string{"hello": "calls=1", "command|info": "calls=1", "set": "calls=1", "delifeq": "calls=1", "total_error_replies": "0"}
	}
	wantCode(t, h.run("job", "--", "true"), 0) // loads the release script
	if err := h.client.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, h.run("job", "--", "true"), 0)
	stats, err := h.client.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]string)
	for line := range strings.SplitSeq(stats, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if name, ok := strings.CutPrefix(k, "cmdstat_"); ok && name != "info" && name != "config|resetstat" {
			calls, _, _ := strings.Cut(v, ",")
			got[name] = calls
		}
		if k == "total_error_replies" {
			got[k] = v
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the server saw %v, want %v", got, want)
	}
}

// TestSilentRedisIsUnreachable: a server that takes the connection but never
// answers is reported as unreachable (69) within the first contact's bound,
// even under a -wait that ends first: "still held after waiting" (75) would
// be a skip to cron, while nothing is known of the lock.
func TestSilentRedisIsUnreachable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	go func() {
		var conns []net.Conn // held open, unanswered, until the listener closes
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range conns {
					_ = c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	addr := silent.Addr().String()
	r := h.run("-redis", "redis://"+addr, "-wait", "100ms", "job", "--", "touch", "ran")
	wantCode(t, r, exitUnavailable)
	if !strings.Contains(r.stderr, "cannot reach Redis at "+addr) {
		t.Errorf("stderr: got %q, want it to say it cannot reach Redis at %s", r.stderr, addr)
	}
	h.wantNoFile("ran")
}

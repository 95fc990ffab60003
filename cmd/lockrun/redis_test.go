package main

import (
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

package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
)

func TestStatusReportsForeignKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name        string
		lock, fence any    // a string is SET, a []string RPUSHed; nil leaves the key alone
		want        int    // exit status
		line        string // a line of stdout
	}{
		{"lock key is a list", []string{"x"}, nil, exitDataErr, "held: unknown: the key holds a list, not a lock"},
		{"counter is a list", nil, []string{"7"}, exitDataErr, "last token: unknown: leasekit:{counter-is-a-list}:fence holds a list, not a fencing counter"},
		{"counter is garbage", nil, "garbage", exitDataErr, `last token: "garbage" (not a fencing token: the counter is corrupt)`},
		{"counter is a fraction", nil, "1.5", exitDataErr, `last token: "1.5" (not a fencing token`},
		{"counter has a space", nil, " 7", exitDataErr, `last token: " 7" (not a fencing token`},
		{"counter is empty", nil, "", exitDataErr, `last token: "" (not a fencing token`},
		{"counter is the largest token", nil, "9223372036854775807", exitDataErr, `last token: "9223372036854775807" (the largest token there is`},
		{"counter is a token", nil, "7", 0, "last token: 7"},
		{"lock without expiry", "someone-else", nil, 0, "ttl: none (the key has no expiry)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := h.with(t)
			name := strings.ReplaceAll(tc.name, " ", "-")
			h.put(scripts.LockKey(lease.DefaultPrefix, name), tc.lock)
			h.put(scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, name)), tc.fence)
			r := h.run("-status", name)
			wantCode(t, r, tc.want)
			if !strings.Contains(r.stdout, "\n"+tc.line) {
				t.Errorf("stdout: got %q, want the line %q", r.stdout, tc.line)
			}
			if tc.want != 0 && !strings.Contains(r.stderr, " holds ") {
				t.Errorf("stderr: got %q, want it to say what the key holds", r.stderr)
			}
			if strings.Contains(r.stdout+r.stderr, "someone-else") {
				t.Errorf("the output shows the lock's value:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
}

// put stores v at key: a string with SET, a []string with RPUSH, nothing for
// nil.
func (h *harness) put(key string, v any) {
	h.t.Helper()
	var err error
	switch v := v.(type) {
	case nil:
		return
	case string:
		err = h.client.Set(h.t.Context(), key, v, 0).Err()
	case []string:
		err = h.client.RPush(h.t.Context(), key, v).Err()
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

func TestStatusNeedsOnlyReads(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// A user who may run PTTL and GET, and not TYPE, which is beyond the
	// ACL the README gives leasekit.
	if err := h.client.Do(t.Context(), "ACL", "SETUSER", "watcher", "on", ">s3cret", "~*", "+ping", "+hello", "+client", "+pttl", "+get").Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://watcher:s3cret@" + h.addr
	h.put(scripts.LockKey(lease.DefaultPrefix, "watched"), "someone-else")
	h.put(scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, "watched")), "7")
	r := h.run("-redis", url, "-status", "watched")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "held: yes\n") || !strings.Contains(r.stdout, "last token: 7\n") {
		t.Errorf("stdout: got %q, want held: yes and last token: 7", r.stdout)
	}
	h.put(scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, "listed")), []string{"7"})
	r = h.run("-redis", url, "-status", "listed")
	wantCode(t, r, exitDataErr)
	if want := "last token: unknown: leasekit:{listed}:fence holds a non-string value, not a fencing counter"; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout: got %q, want the line %q", r.stdout, want)
	}
}

// TestCorruptKeysExit65: a key of the lock that holds what leasekit never
// writes fails a run with the status -status gives it, 65, not 69 (Redis
// could not be reached), and the command does not run.
func TestCorruptKeysExit65(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		name        string
		lock, fence any // as in TestStatusReportsForeignKeys
		flags       []string
	}{
		{"list", []string{"x"}, nil, nil},
		{"list-fenced", []string{"x"}, nil, []string{"-fenced"}},
		{"list-once", []string{"x"}, nil, []string{"-once", "1m"}},
		{"text-counter", nil, "garbage", []string{"-fenced"}},
		{"list-counter", nil, []string{"7"}, []string{"-fenced"}},
		{"exhausted-counter", nil, "9223372036854775807", []string{"-fenced"}},
		{"ahead-counter", nil, strconv.FormatInt(time.Now().Add(2*time.Hour).UnixMicro(), 10), []string{"-fenced"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := h.with(t)
			h.put(scripts.LockKey(lease.DefaultPrefix, tc.name), tc.lock)
			h.put(scripts.CounterKey(scripts.LockKey(lease.DefaultPrefix, tc.name)), tc.fence)
			r := h.run(append(tc.flags, tc.name, "--", "touch", "ran")...)
			wantCode(t, r, exitDataErr)
			if !strings.Contains(r.stderr, "does not write") {
				t.Errorf("stderr: got %q, want it to say a key holds what leasekit does not write", r.stderr)
			}
			wantCode(t, h.run("-status", tc.name), exitDataErr)
		})
	}
	t.Cleanup(func() { h.wantNoFile("ran") })
}

// TestStatusTellsAStoppedHolder: given the runs' -ttl, -status says a live
// holder refreshes, and one that stopped (SIGSTOP here, as a crash or a
// pause) does not, while its lease still blocks the name; without -ttl it
// does not guess.
func TestStatusTellsAStoppedHolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	holder := h.start(nil, "-ttl", "10s", "stops", "--", "sh", "-c", blockingScript)
	h.waitFile("started")
	status := func(want string) string {
		t.Helper()
		for deadline := time.Now().Add(hang); ; time.Sleep(100 * time.Millisecond) {
			r := h.run("-ttl", "10s", "-status", "stops")
			switch {
			case strings.Contains(r.stdout, want):
				return r.stdout
			case !strings.Contains(r.stdout, "held: yes"):
				t.Fatalf("-status: %q, want %q while the lease is held", r.stdout, want)
			case time.Now().After(deadline):
				t.Fatalf("-status never said %q: %q", want, r.stdout)
			}
		}
	}
	status("refreshing: yes\n")
	if r := h.run("-status", "stops"); !strings.Contains(r.stdout, "refreshing: unknown: pass the runs' -ttl") {
		t.Errorf("-status without -ttl: %q, want it not to guess", r.stdout)
	}
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out := status("refreshing: no: ")
	if !strings.Contains(out, "the name frees in") {
		t.Errorf("-status of a stopped holder: %q, want it to say when the name frees", out)
	}
	_ = holder.cmd.Process.Signal(syscall.SIGCONT)
	h.touch("release")
	holder.wait(t)
}

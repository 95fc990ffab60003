package main

import (
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
)

func TestUsagePrintedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	first, _, _ := strings.Cut(usageLine, "\n")
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"unknown flag", []string{"-frob", "f", "--", "true"}, exitUsage},
		{"bad value", []string{"-ttl", "soon", "f", "--", "true"}, exitUsage},
		{"missing NAME", nil, exitUsage},
		{"help", []string{"-h"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := h.with(t).run(tc.args...)
			wantCode(t, r, tc.want)
			if n := strings.Count(r.stderr, first); n != 1 {
				t.Errorf("stderr has the usage line %d times, want once:\n%s", n, r.stderr)
			}
		})
	}
	r := h.run("-h")
	for _, flag := range []string{"-quiet", "-audit"} {
		if !strings.Contains(r.stderr, flag) {
			t.Errorf("-h: got %q, want it to list %s", r.stderr, flag)
		}
	}
}

func TestQuietSkipsSilently(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	held := lease.LockKey(lease.DefaultPrefix, "held")
	if err := h.client.Set(t.Context(), held, "someone-else", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, h.run("-once", "1m", "nightly", "--", "true"), 0)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"lock held", []string{"held", "--", "touch", "ran"}},
		{"lock held past -wait", []string{"-wait", "100ms", "held", "--", "touch", "ran"}},
		{"fenced lock held", []string{"-fenced", "-audit=false", "held", "--", "touch", "ran"}},
		{"already ran this period", []string{"-once", "1m", "nightly", "--", "touch", "ran"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := h.with(t)
			loud := h.run(tc.args...)
			wantCode(t, loud, exitNotObtained)
			if loud.stderr == "" {
				t.Errorf("without -quiet: stderr is empty, want it to say why the run was skipped")
			}
			quiet := h.run(append([]string{"-quiet"}, tc.args...)...)
			wantCode(t, quiet, exitNotObtained)
			if quiet.stderr != "" {
				t.Errorf("with -quiet: stderr: got %q, want nothing", quiet.stderr)
			}
		})
	}
	t.Cleanup(func() { h.wantNoFile("ran") })
}

func TestAuditCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// This server has no AOF: the audit warns unless it is off.
	r := h.run("-fenced", "-audit=false", "audited", "--", "true")
	wantCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("-audit=false: stderr: got %q, want nothing", r.stderr)
	}
	r = h.run("-fenced", "audited", "--", "true")
	wantCode(t, r, 0)
	if !strings.Contains(r.stderr, "audit") {
		t.Errorf("by default: stderr: got %q, want the audit's warning", r.stderr)
	}
}

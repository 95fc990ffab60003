package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/lease"
	"github.com/leasekit/leasekit/scripts"
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
	held := scripts.LockKey(lease.DefaultPrefix, "held")
	if err := h.client.Set(t.Context(), held, "someone-else", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// A period of an hour: the parallel subtests below may wait a minute and
	// more for their turn on a loaded machine, and must still find it running.
	wantCode(t, h.run("-once", "1h", "nightly", "--", "true"), 0)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"lock held", []string{"held", "--", "touch", "ran"}},
		{"lock held past -wait", []string{"-wait", "100ms", "held", "--", "touch", "ran"}},
		{"fenced lock held", []string{"-fenced", "-audit=false", "held", "--", "touch", "ran"}},
		{"already ran this period", []string{"-once", "1h", "nightly", "--", "touch", "ran"}},
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

// TestUsageErrorsNameTheMistake: each usage error names what is missing or
// misplaced, not a part the command line has.
func TestUsageErrorsNameTheMistake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing", nil, "missing NAME"},
		{"only flags", []string{"-ttl", "1s"}, "missing NAME"},
		{"NAME missing before --", []string{"--", "true"}, "missing NAME before --"},
		{"NAME missing after flags", []string{"-wait", "5s", "--", "true"}, "missing NAME before --"},
		{"NAME missing, -- alone", []string{"--"}, "missing NAME before --"},
		{"NAME missing before two --", []string{"--", "--", "true"}, "missing NAME before --"},
		{"-- missing", []string{"job", "true"}, `missing -- after NAME "job"`},
		{"-- and COMMAND missing", []string{"job"}, `missing -- COMMAND after NAME "job"`},
		{"COMMAND missing", []string{"job", "--"}, "missing COMMAND after --"},
		{"flag after NAME", []string{"job", "-ttl", "1s", "--", "true"}, `got "-ttl" after NAME`},
		{"status with a command", []string{"-status", "job", "--", "true"}, `-status takes no command; got "true"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseArgs(tc.args, nil, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("lockrun %q: got %v, want a usage error containing %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestNameAfterAnEndOfFlags: a -- that ends the flags may still come before
// NAME -- COMMAND, and a -- in the command's arguments is the command's.
func TestNameAfterAnEndOfFlags(t *testing.T) {
	t.Parallel()
	c, err := parseArgs([]string{"-wait", "5s", "--", "job", "--", "echo", "--"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"echo", "--"}; c.name != "job" || !slices.Equal(c.command, want) {
		t.Errorf("name %q, command %q: want %q, %q", c.name, c.command, "job", want)
	}
}

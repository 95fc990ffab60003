package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaderPid has the command's shell, which leads its process group, write
// its pid (the group's id) to leader.pid.
const leaderPid = `echo $$ > leader.new && mv leader.new leader.pid; `

// TestKilledLockrunTakesTheGroupAlong: a lockrun killed with SIGKILL cannot
// stop its command's processes, which would run on without the lock once
// the lease ran out, and overlap the next run. The parent-death signal kills
// the shell only; the guardian kills its whole group.
func TestKilledLockrunTakesTheGroupAlong(t *testing.T) {
	t.Parallel()
	requireProc(t)
	h := newHarness(t)
	for _, tc := range []struct {
		name, script string
		jobs         []string // files the processes that must die write their pids to
	}{
		{"sleep-then-echo", worker("sleep.pid") + "; echo done", []string{"sleep.pid"}},
		{"background-jobs", worker("a.pid") + " & " + worker("b.pid") + " & wait; echo done", []string{"a.pid", "b.pid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := h.with(t)
			h.dir = t.TempDir()
			p := h.start(nil, "killed-"+tc.name, "--", "sh", "-c", leaderPid+tc.script)
			pids := []int{h.pidIn("leader.pid")}
			for _, f := range tc.jobs {
				pids = append(pids, h.pidIn(f))
			}
			// Killed before the guardian had started, lockrun would leave
			// the jobs behind: see startGuardian.
			waitFor(t, "the guardian of group "+strconv.Itoa(pids[0]), func() bool { return guardianOf(pids[0]) != 0 })
			if err := p.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-p.done
			for _, pid := range pids {
				waitFor(t, "the end of pid "+strconv.Itoa(pid)+" after lockrun was killed", func() bool { return !running(pid) })
			}
			if out := contents(t, p.stdout); strings.Contains(out, "done") {
				t.Errorf("stdout: got %q: the shell ran on after lockrun was killed", out)
			}
		})
	}
}

// TestGuardianEndsWithLockrun: the guardian stays out of the signals meant
// for the command and for lockrun, and does not outlive a lockrun that exits
// normally, even as a zombie.
func TestGuardianEndsWithLockrun(t *testing.T) {
	t.Parallel()
	requireProc(t)
	h := newHarness(t)
	p := h.start(nil, "guarded", "--", "sh", "-c", leaderPid+blockingScript)
	pgid := h.pidIn("leader.pid")
	var guard int
	waitFor(t, "the guardian of group "+strconv.Itoa(pgid), func() bool { guard = guardianOf(pgid); return guard != 0 })
	if got := procStat(t, guard)[2]; got != strconv.Itoa(guard) {
		t.Errorf("the guardian's process group: got %s, want its own, %d (not the command's %d, nor lockrun's)", got, guard, pgid)
	}
	// It ignores them once its main runs, a moment after its exec.
	var want uint64
	for _, s := range forwarded {
		want |= 1 << (s.(syscall.Signal) - 1)
	}
	waitFor(t, "the guardian to ignore the signals lockrun forwards (pkill lockrun would end it)", func() bool {
		return procStatus(t, guard, "SigIgn")&want == want
	})
	h.touch("release")
	wantCode(t, p.wait(t), 0)
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(guard))); err == nil {
		t.Errorf("the guardian (pid %d) is still there after lockrun exited: %v", guard, procStat(t, guard))
	}
}

// guardianOf returns the pid of the running guardian of the process group
// pgid, or 0 if there is none.
func guardianOf(pgid int) int {
	want := []byte(guardianArg0 + "\x00" + strconv.Itoa(pgid) + "\x00")
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, path := range paths {
		if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, want) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil && running(pid) {
			return pid
		}
	}
	return 0
}

// procStat returns the fields of /proc/PID/stat that follow the command
// name: state, ppid, pgrp, and so on.
func procStat(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
}

// procStatus returns the hexadecimal mask of /proc/PID/status called field.
func procStatus(t *testing.T, pid int, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return mask
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// waitFor waits until cond holds, failing the test after hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hang); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", hang, what)
		}
	}
}

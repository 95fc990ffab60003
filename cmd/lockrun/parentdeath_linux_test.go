package main

import (
	"testing"
	"time"
)

// TestCommandDiesWithLockrun: a lockrun killed with SIGKILL (as the OOM
// killer does) cannot stop its command, which would run on without the lock
// once the lease ran out. The kernel kills the command instead.
func TestCommandDiesWithLockrun(t *testing.T) {
	t.Parallel()
	requireProc(t)
	h := newHarness(t)
	const script = `echo $$ > cmd.new && mv cmd.new cmd.pid && exec sleep 38`
	p := h.start(nil, "killed", "--", "sh", "-c", script)
	pid := h.pidIn("cmd.pid")
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	for deadline := time.Now().Add(hang); running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) still runs %v after lockrun was killed", pid, hang)
		}
	}
}

package main

import "syscall"

// dieWithLockrun has the kernel SIGKILL the command when lockrun dies, even
// by SIGKILL (the OOM killer), so that it cannot run on without the lock.
// It reaches the command only; the guardian (see startGuardian) kills the
// rest of its group, and this still kills the command should lockrun die
// before the guardian starts, or the guardian be gone. The kernel sends it
// when the thread that started the command ends, not the process: see
// startOnOwnThread.
func dieWithLockrun(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

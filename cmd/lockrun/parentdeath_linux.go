package main

import "syscall"

// dieWithLockrun has the kernel SIGKILL the command when lockrun dies, even
// by SIGKILL (the OOM killer), so that it cannot run on without the lock.
// The kernel sends it when the thread that started the command ends, not
// the process: see startOnOwnThread.
func dieWithLockrun(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

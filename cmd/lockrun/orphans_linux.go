package main

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h), which the
// syscall package defines on some architectures only.
const prSetChildSubreaper = 36

// adoptOrphans makes lockrun the parent of every process of the command's
// group whose parent exits (a child subreaper), instead of PID 1. lockrun
// then reaps them itself (see group.gone): a dead process counts as a member
// of its group until reaped, and a PID 1 that reaps late or never (a
// container's) would keep lockrun waiting. Where it fails (a kernel before
// 3.4) lockrun relies on PID 1.
func adoptOrphans() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

package etcdtest

import "syscall"

// dieWithTest has the kernel SIGKILL a member when the test process dies,
// so that a crashed or killed test run leaves no etcd behind.
func dieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

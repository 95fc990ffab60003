package redistest

import "syscall"

// dieWithTest has the kernel SIGKILL a server when the test process dies,
// so that a crashed or killed test run leaves no redis-server behind.
func dieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

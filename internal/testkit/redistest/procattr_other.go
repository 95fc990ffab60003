//go:build !linux

package redistest

import "syscall"

// dieWithTest does nothing where there is no parent-death signal: a killed
// test run leaves its servers running.
func dieWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

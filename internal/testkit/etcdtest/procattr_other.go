//go:build !linux

package etcdtest

import "syscall"

// dieWithTest does nothing where there is no parent-death signal: a killed
// test run leaves its members running.
func dieWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

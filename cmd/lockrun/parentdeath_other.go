//go:build !linux

package main

import "syscall"

// dieWithLockrun does nothing where there is no parent-death signal: a
// lockrun killed by SIGKILL leaves its command running.
func dieWithLockrun(*syscall.SysProcAttr) {}

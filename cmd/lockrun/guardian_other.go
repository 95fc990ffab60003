//go:build !linux

package main

// startGuardian starts no guardian: the guardian is lockrun re-executed
// through /proc/self/exe, which only Linux has. A lockrun killed by SIGKILL
// leaves the command's processes running.
func startGuardian(int) (*guardian, error) { return nil, nil }

// guard refuses to run, since no lockrun starts a guardian here.
func guard([]string) int { return exitUsage }

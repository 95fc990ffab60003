//go:build !linux

package main

// adoptOrphans does nothing where there are no child subreapers: PID 1 reaps
// the command's orphans, which gone waits for.
func adoptOrphans() {}

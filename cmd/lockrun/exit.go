package main

import "fmt"

// Exit statuses of lockrun's own, from sysexits.h, chosen so that they do not
// collide with the usual statuses of a shell command (1, 2, 126, 127, 128+N).
const (
	exitNotBroken   = 1  // -break: nobody held the lock (no command runs, so 1 collides with none)
	exitUsage       = 64 // EX_USAGE: bad command line
	exitDataErr     = 65 // EX_DATAERR: a key of the lock holds what leasekit never writes
	exitUnavailable = 69 // EX_UNAVAILABLE: Redis cannot be reached
	exitLost        = 74 // EX_IOERR: the lease was lost while the command ran
	exitNotObtained = 75 // EX_TEMPFAIL: the lock is held; try again later
	exitNoPerm      = 77 // EX_NOPERM: Redis refused the credentials or a command
)

// exitError is a failure that ends lockrun with its own status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitf(code int, format string, a ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, a...)}
}

// Package pause holds tests, and nothing else, of locks whose waiters and
// holders are real processes frozen by SIGSTOP, killed with kill -9, and
// cut off by a lock server that restarts: the failures a goroutine cannot
// play, since a paused process stops its timers and its subscription reader
// together.
package pause

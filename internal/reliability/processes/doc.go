// Package processes holds tests, and nothing else, of locks whose waiters
// and holders are real processes: frozen by SIGSTOP, killed with kill -9,
// starved of CPU, cut off by a lock server that restarts or pauses. A
// goroutine cannot play these failures: a paused process stops its timers
// and its subscription reader together.
package processes

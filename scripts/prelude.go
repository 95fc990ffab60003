package scripts

import (
	_ "embed"
	"strconv"
)

// Linger is how long, in ms, a lock's key whose value carries the mark of
// waiters outlives its lease, and a lock's or a semaphore's queue the lease
// of the holder it waits for: so that nobody takes the lock with a plain SET
// NX while waiters queue. The scripts read it as LINGER; Linger (wire.go)
// and internal/lease's Linger are this.
const LingerMillis = 10000

//go:embed prelude.lua
var preludeSrc string

// prelude starts every script of a lock and of a semaphore: LINGER, then
// prelude.lua's clock, value reader and lease restart.
var prelude = "local LINGER = " + strconv.Itoa(LingerMillis) + "\n" + preludeSrc

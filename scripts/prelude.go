package scripts

import (
	_ "embed"
	"regexp"
	"strconv"
	"strings"
)

// Linger is how long, in ms, a lock's key whose value carries the mark of
// waiters outlives its lease, and a lock's or a semaphore's queue the lease
// of the holder it waits for: so that nobody takes the lock with a plain SET
// NX while waiters queue. The scripts read it as LINGER; Linger (wire.go)
// and internal/lease's Linger are this.
const LingerMillis = 10000

//go:embed prelude.lua
var preludeSrc string

// prelude is what the scripts of a lock and of a semaphore may call: the
// server's clock, a lock's value and the restart of its lease.
var prelude = preludeSrc

// lingerName is the name the scripts' code gives Linger.
var lingerName = regexp.MustCompile(`\bLINGER\b`)

// linger is the script src with Linger written where its code (not a
// comment) says LINGER: a number in the code costs nothing a call, where a
// local that a function captures costs an upvalue each call
// (docs/protocol.md, "Cost").
func linger(src string) string {
	lines := strings.Split(src, "\n")
	for i, line := range lines {
		code, comment, found := strings.Cut(line, "--")
		if found {
			comment = "--" + comment
		}
		lines[i] = lingerName.ReplaceAllString(code, strconv.Itoa(LingerMillis)) + comment
	}
	return strings.Join(lines, "\n")
}

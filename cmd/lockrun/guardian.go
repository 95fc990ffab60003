package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

// guardianArg0 is the argv[0] of a lockrun re-executed as a guardian (see
// startGuardian); ps shows it, followed by the process group it guards.
const guardianArg0 = "lockrun: guardian"

// guardian is a process that SIGKILLs the command's process group if
// lockrun dies first, however it dies. It blocks reading a pipe, the
// lifeline, whose only write end lockrun holds: the read returns only when
// the kernel closes that end, at lockrun's exit. A lockrun that exits
// normally ends the guardian first, once the group is gone (standDown).
type guardian struct {
	cmd      *exec.Cmd
	lifeline *os.File // the write end; it must stay open until standDown
}

// guardGroup starts the guardian of the process group pgid. If it cannot,
// it says so on stderr and returns nil: the command runs already, and
// lockrun goes on, since only its being killed would then leave processes
// behind.
func guardGroup(pgid int, stderr io.Writer) *guardian {
	g, err := startGuardian(pgid)
	if err != nil {
		fmt.Fprintf(stderr, "lockrun: no guardian for the command's process group (%v): if lockrun is killed, the processes the command started run on\n", err)
	}
	return g
}

// standDown ends the guardian without it signalling the group. Call it only
// once the group is gone, and never from a defer: a lockrun that panics
// while the group runs must leave the guardian to kill it. The guardian is
// killed before the lifeline is closed, since the close is what it acts on,
// and reaped, so that it outlives lockrun neither as a process nor as a
// zombie left to a PID 1 that may never reap it.
func (g *guardian) standDown() {
	if g == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
	_ = g.lifeline.Close()
}

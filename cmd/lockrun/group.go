package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// pollInterval is how often lockrun checks whether the processes the command
// left in its group have ended: they are not lockrun's children while their
// parents live, so no wait reports them.
const pollInterval = 20 * time.Millisecond

// group is the command's process group: the command, which leads it, and
// every process it starts that does not leave it (setsid, setpgid). lockrun
// signals the group rather than the command, so that a shell's children stop
// with the shell, and waits for the whole group, so that none of them runs
// once the lock is released.
type group struct {
	pgid   int
	grace  time.Duration
	stderr io.Writer
	tty    *terminal // the terminal the group has, or nil

	stopping bool             // SIGTERM (or SIGKILL) has been sent
	kill     <-chan time.Time // fires when the grace period ends
}

// supervise returns once the leader has exited (exited is closed) and no
// process of the group is left. Until then it forwards sigs to the group,
// stops the group when ctx ends (the lease was lost), and stops what the
// leader left behind once it exits.
func (g *group) supervise(ctx context.Context, sigs <-chan os.Signal, exited <-chan struct{}) {
	lost := ctx.Done()
	var poll <-chan time.Time
	for {
		select {
		case s := <-sigs:
			g.forward(s)
		case <-lost:
			lost = nil
			g.stop(fmt.Sprintf("%v; stopping the command's process group", context.Cause(ctx)))
		case <-g.kill:
			g.kill = nil
			g.signal(syscall.SIGKILL)
		case <-exited:
			exited = nil
			if g.gone() {
				return
			}
			g.stop("the command exited, leaving processes in its group; stopping them")
			t := time.NewTicker(pollInterval)
			defer t.Stop()
			poll = t.C
		case <-poll:
			if g.gone() {
				return
			}
		}
	}
}

// forward passes a signal lockrun received on to the group. SIGCHLD comes
// only when the command has the terminal: the leader may have stopped
// (Ctrl-Z), and lockrun continues the group (see terminal.resume).
func (g *group) forward(s os.Signal) {
	if s == syscall.SIGCHLD {
		if g.tty.resume(g.pgid) {
			g.signal(syscall.SIGCONT)
		}
		return
	}
	if sig, ok := s.(syscall.Signal); ok {
		g.signal(sig)
	}
}

// stop sends the group SIGTERM, and SIGKILL after the grace period (at once
// if it is 0), saying why on stderr. Only the first call acts.
func (g *group) stop(why string) {
	if g.stopping {
		return
	}
	g.stopping = true
	if g.grace == 0 {
		fmt.Fprintf(g.stderr, "lockrun: %s: SIGKILL\n", why)
		g.signal(syscall.SIGKILL)
		return
	}
	fmt.Fprintf(g.stderr, "lockrun: %s: SIGTERM now, SIGKILL in %v\n", why, g.grace)
	g.signal(syscall.SIGTERM)
	g.signal(syscall.SIGCONT) // a stopped process acts on SIGTERM only once continued, as shells' kill does
	g.kill = time.After(g.grace)
}

// signal sends sig to every process of the group. It fails only when the
// group is gone (ESRCH), which gone reports, or when no member may be
// signalled (EPERM: a setuid program), which lockrun cannot help.
func (g *group) signal(sig syscall.Signal) {
	_ = syscall.Kill(-g.pgid, sig)
}

// gone reports whether no process of the group is left. It first reaps the
// members that were orphaned to lockrun (see adoptOrphans): an exited process
// counts as a member until it is reaped. Call it only once the leader is
// reaped, since this wait would take the leader's status from cmd.Wait.
func (g *group) gone() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-g.pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	return errors.Is(syscall.Kill(-g.pgid, 0), syscall.ESRCH)
}

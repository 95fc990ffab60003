package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// Shell statuses for a command that could not run.
const (
	exitCannotRun = 126
	exitNotFound  = 127
)

// forwarded are the signals lockrun passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// command is the command lockrun runs under the lock.
type command struct {
	argv  []string
	env   []string
	stdio stdio
	grace time.Duration // between SIGTERM and SIGKILL once the lease is lost
}

// run runs the command to its end, forwarding lockrun's signals to it, and
// returns its exit status as a shell reports it. When ctx ends (the lease was
// lost) the command gets SIGTERM, then SIGKILL after the grace period.
func (c command) run(ctx context.Context) (int, error) {
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Env = c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdio.in, c.stdio.out, c.stdio.err
	cmd.Cancel = func() error { return c.stop(ctx, cmd.Process) }
	cmd.WaitDelay = c.grace // then exec sends SIGKILL

	// Catch the signals before the command starts, so that none arriving in
	// between kills lockrun and orphans the command with the lock held.
	sigs := make(chan os.Signal, len(forwarded))
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return exitNotFound, exitf(exitNotFound, "cannot run the command: %w", err)
		}
		return exitCannotRun, exitf(exitCannotRun, "cannot run the command: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	go forward(sigs, cmd.Process, done)

	err := cmd.Wait()
	if cmd.ProcessState == nil {
		return exitCannotRun, exitf(exitCannotRun, "waiting for the command: %w", err)
	}
	return shellStatus(cmd.ProcessState), nil
}

// stop begins ending the command once the lease is lost.
func (c command) stop(ctx context.Context, p *os.Process) error {
	if c.grace == 0 {
		fmt.Fprintf(c.stdio.err, "lockrun: %v; killing the command (SIGKILL)\n", context.Cause(ctx))
		return p.Kill()
	}
	fmt.Fprintf(c.stdio.err, "lockrun: %v; stopping the command: SIGTERM now, SIGKILL in %v\n", context.Cause(ctx), c.grace)
	return p.Signal(syscall.SIGTERM)
}

// forward passes each signal lockrun receives on to p until done closes.
func forward(sigs <-chan os.Signal, p *os.Process, done <-chan struct{}) {
	for {
		select {
		case s := <-sigs:
			_ = p.Signal(s) // the command may have exited already
		case <-done:
			return
		}
	}
}

// shellStatus is the status a shell reports for an ended process: its exit
// code, or 128+N if signal N killed it.
func shellStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

// Shell statuses for a command that could not run.
const (
	exitCannotRun = 126
	exitNotFound  = 127
)

// forwarded are the signals lockrun passes on to the command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// command is the command lockrun runs under the lock.
type command struct {
	argv  []string
	env   []string
	stdio stdio
	grace time.Duration // between SIGTERM and SIGKILL once the group is stopped
}

// run runs the command in a process group of its own until the command has
// exited and its whole group is gone, forwarding lockrun's signals to the
// group, and returns the command's exit status as a shell reports it. When
// ctx ends (the lease was lost) the group gets SIGTERM, then SIGKILL after the
// grace period; so does what the command leaves behind when it exits. A
// guardian kills the group should lockrun die first (see startGuardian).
func (c command) run(ctx context.Context) (int, error) {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = c.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdio.in, c.stdio.out, c.stdio.err
	tty := foregroundTerminal(c.stdio.in)
	defer tty.takeBack()
	cmd.SysProcAttr = tty.procAttr()
	dieWithLockrun(cmd.SysProcAttr)
	adoptOrphans()

	// Catch the signals before the command starts, so that none arriving in
	// between kills lockrun and orphans the command with the lock held.
	sigs := make(chan os.Signal, len(forwarded)+1)
	signal.Notify(sigs, tty.signals()...)
	defer signal.Stop(sigs)
	var waitErr error
	exited := make(chan struct{})
	if err := startOnOwnThread(cmd, func(err error) { waitErr = err; close(exited) }); err != nil {
		return startError(cmd.Path, err)
	}
	tty.handedOver()
	// The guardian starts on a goroutine of its own, so that its fork and
	// exec overlap the command's run instead of adding to lockrun's.
	guarded := make(chan *guardian, 1)
	go func() { guarded <- guardGroup(cmd.Process.Pid, c.stdio.err) }()

	g := &group{pgid: cmd.Process.Pid, grace: c.grace, stderr: c.stdio.err, tty: tty}
	g.supervise(ctx, sigs, exited)
	(<-guarded).standDown() // not deferred: see standDown
	if cmd.ProcessState == nil {
		return exitCannotRun, exitf(exitCannotRun, "waiting for the command: %w", waitErr)
	}
	return shellStatus(cmd.ProcessState), nil
}

// startOnOwnThread starts cmd, then waits for it and passes Wait's error to
// exited, on an OS thread that nothing else runs on and that lives until the
// command has exited. The parent-death signal (see dieWithLockrun) fires when
// the thread that started the command ends: on a thread shared with other
// goroutines, one that locked it and exited would end it, killing the
// command while lockrun lives on.
func startOnOwnThread(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, after Wait.
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			exited(cmd.Wait())
		}
	}()
	return <-started
}

// startError is what a shell reports for a command it could not start: 127
// when there is no such command, 126 when there is one that cannot be
// executed (no x bit, a directory, a missing #! interpreter, an unknown
// format). path is the command as exec resolved it.
func startError(path string, err error) (int, error) {
	code := exitCannotRun
	if errors.Is(err, exec.ErrNotFound) || (errors.Is(err, fs.ErrNotExist) && !exists(path)) {
		code = exitNotFound
	}
	return code, exitf(code, "cannot run the command: %w", err)
}

// exists reports whether path names a file. exec reports a script whose #!
// interpreter is missing as "no such file" too; the script exists, though.
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// shellStatus is the status a shell reports for an ended process: its exit
// code, or 128+N if signal N killed it.
func shellStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

package main

import (
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"unsafe"
)

// terminal is lockrun's controlling terminal, lent to the command. The
// command runs in a process group of its own (see group), which the terminal
// treats as a background job: reading it would stop the command (SIGTTIN),
// and Ctrl-C would reach lockrun only. So when lockrun's standard input is
// its controlling terminal and lockrun is the foreground job there (started
// by hand from a shell), the command's group becomes the foreground job
// while it runs, as a shell does for its jobs, and lockrun takes the
// terminal back when the group is gone. A nil *terminal (cron, systemd,
// redirected input, lockrun in the background) does none of this.
type terminal struct {
	fd    uintptr
	owner int // lockrun's process group: the foreground job before the command
}

// foregroundTerminal returns the terminal that is lockrun's standard input,
// in, if lockrun is its foreground job, else nil.
func foregroundTerminal(in io.Reader) *terminal {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	// Fails (ENOTTY) unless f is a terminal and lockrun's controlling one.
	pgrp, err := tcgetpgrp(f.Fd())
	if err != nil || pgrp != syscall.Getpgrp() {
		return nil
	}
	return &terminal{fd: f.Fd(), owner: pgrp}
}

// procAttr puts the command in a process group of its own, in the
// terminal's foreground if there is a terminal.
func (t *terminal) procAttr() *syscall.SysProcAttr {
	if t == nil {
		return &syscall.SysProcAttr{Setpgid: true}
	}
	return &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: int(t.fd)}
}

// signals are those lockrun catches while the command runs: the ones it
// forwards, and, with a terminal, SIGCHLD, which says the command may have
// stopped (see resume).
func (t *terminal) signals() []os.Signal {
	if t == nil {
		return forwarded
	}
	return append(slices.Clone(forwarded), syscall.SIGCHLD)
}

// handedOver is called once the command has started. lockrun is now a
// background job of the terminal: ignoring SIGTTOU lets it write there
// (under stty tostop) and take the terminal back. Ignoring it before the
// start would have the command inherit the ignored signal.
func (t *terminal) handedOver() {
	if t != nil {
		signal.Ignore(syscall.SIGTTOU)
	}
}

// resume reports whether the group pgid, which may have stopped, should be
// continued: yes when it has the terminal, so that Ctrl-Z cannot suspend a
// command that holds the lock, out of sight of the shell, which knows only
// lockrun. A group that lost the terminal (a command that handed it to
// another job) stays stopped when it reads the terminal, as a background
// job does, rather than being woken into the same stop again and again.
func (t *terminal) resume(pgid int) bool {
	if t == nil {
		return false
	}
	fg, err := tcgetpgrp(t.fd)
	return err == nil && fg == pgid
}

// takeBack makes lockrun's process group the terminal's foreground again.
// It runs even if the start failed, since the child may have taken the
// terminal before its exec failed.
func (t *terminal) takeBack() {
	if t == nil {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	_ = tcsetpgrp(t.fd, t.owner)
}

func tcgetpgrp(fd uintptr) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

func tcsetpgrp(fd uintptr, pgrp int) error {
	p := int32(pgrp)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p))); errno != 0 {
		return errno
	}
	return nil
}

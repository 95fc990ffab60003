package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestCommandGetsTheTerminal(t *testing.T) {
	t.Parallel()
	requireProc(t)
	h := newHarness(t)
	master, slave := openTerminal(t)
	// The command records its pid, process group and the terminal's
	// foreground group (fields 1, 5 and 8 of /proc/PID/stat), then reads a
	// line from the terminal.
	const script = `set -- $(cat /proc/$$/stat); echo "$1 $5 $8" > ids.new; mv ids.new ids
read line; echo "$line" > got`
	cmd := exec.Command(h.bin, "tty", "--", "sh", "-c", script)
	cmd.Dir, cmd.Env = h.dir, h.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// lockrun leads a session of its own whose terminal is slave: it is the
	// foreground job there, as when started by hand from a shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	p := &proc{cmd: cmd, stdout: outputFile(t, "stdout"), stderr: outputFile(t, "stderr"), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = slave.Close()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	output := make(chan string, 1)
	go func() { b, _ := io.ReadAll(master); output <- string(b) }() // ends with EIO once the terminal is closed

	h.waitFile("ids")
	ids := strings.Fields(readFile(t, filepath.Join(h.dir, "ids")))
	if len(ids) != 3 || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("pid, process group, terminal's foreground group: got %q, want three equal ids (the command leads its group, which has the terminal)", ids)
	}
	// Ctrl-Z stops the command's group; lockrun continues it, so that the
	// line typed next is read.
	if _, err := master.Write([]byte("\x1ahello\n")); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	out := <-output
	wantCode(t, r, 0)
	if got := readFile(t, filepath.Join(h.dir, "got")); got != "hello\n" {
		t.Errorf("the command read %q, want %q; terminal output:\n%s", got, "hello\n", out)
	}
}

// openTerminal opens a pseudo-terminal, or skips the test where there is none.
func openTerminal(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = master.Close() })
	var unlock int32
	var n uint32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatal(err)
	}
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slave.Close() })
	return master, slave
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

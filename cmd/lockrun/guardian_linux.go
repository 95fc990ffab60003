package main

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// lifelineFD is the guardian's descriptor for the lifeline's read end: the
// first of exec.Cmd's ExtraFiles.
const lifelineFD = 3

// startGuardian starts the guardian of the process group pgid: lockrun
// itself, re-executed through /proc/self/exe (which still works when the
// binary was replaced or deleted since lockrun started), running guard.
//
// Why a guardian. The parent-death signal (see dieWithLockrun) reaches the
// command only, and is not inherited across fork: a shell's sleep ran on,
// without the lock, after lockrun was killed -9. The kernel kills a whole
// group when one process dies only in a PID namespace (it needs privileges
// or user namespaces, and makes the command PID 1, which ignores SIGTERM
// without a handler) or a cgroup (it needs delegation, which systemd gives
// services, not crontabs). A subreaper inherits the orphans but dies with
// lockrun. A pipe's end, though, is closed by the kernel whatever kills its
// holder, and a process reading the other end sees it. The guardian costs a
// fork and exec, beside the command's start, and no Redis round trip.
//
// The guardian leads a process group of its own, so that the signals sent
// to lockrun's group (a shell's kill -9 %1, timeout -s KILL) do not end it
// with lockrun, and it ignores the signals lockrun forwards (pkill -f
// lockrun reaches it too): lockrun stops the group for those. What it
// cannot catch: a process that leaves the group (setsid, setpgid, a shell
// with job control), a guardian itself killed or stopped, and a lockrun
// killed between the command's start and the guardian's, when the
// parent-death signal still kills the command but not what it started in
// that instant.
func startGuardian(pgid int) (*guardian, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{guardianArg0, strconv.Itoa(pgid)},
		Dir:         "/",
		Env:         []string{}, // it needs none, and holds no copy of a password in LEASEKIT_REDIS_URL
		ExtraFiles:  []*os.File{r},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return nil, err
	}
	return &guardian{cmd: cmd, lifeline: w}, nil
}

// guard is the guardian's main, with its arguments (the process group).
// It blocks until the lifeline is closed, then SIGKILLs the group. The
// group's id stays the group's while any member lives, and lockrun stands
// the guardian down as soon as it finds none left: another group could have
// taken the id only if lockrun died in that instant and the kernel had
// handed out every other pid since the group began. It refuses to run
// (64) unless started as startGuardian starts it, so that an argument of 1
// or less (kill(-1) signals every process) or a descriptor that is no
// lifeline cannot make it kill anything.
func guard(args []string) int {
	signal.Ignore(forwarded...)
	if len(args) != 1 {
		return exitUsage
	}
	pgid, err := strconv.Atoi(args[0])
	var st syscall.Stat_t
	if err != nil || pgid <= 1 || syscall.Fstat(lifelineFD, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return exitUsage
	}
	var b [1]byte
	for {
		n, err := syscall.Read(lifelineFD, b[:])
		if n <= 0 && err != syscall.EINTR {
			break
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return 0
}

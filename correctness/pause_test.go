package correctness_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekit/leasekit/internal/testkit/proc"

	"github.com/leasekit/leasekit/correctness"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// childEnv carries "addr key" to a re-executed test binary that plays the
// paused holder.
const childEnv = "LEASEKIT_PAUSED_CHILD"

// pausedChild acquires a short lease, checks it, reports its token, and then
// writes through the Register as soon as it reads a line on stdin. The parent
// sends that line only after SIGSTOP has frozen the child, so the write can
// only happen after the pause: the paused-holder scenario with a real pause.
func pausedChild() int {
	addr, key, _ := strings.Cut(os.Getenv(childEnv), " ")
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	l := correctness.New(client, correctness.WithAudit(false))
	defer l.Close()
	lease, err := acquireLive(ctx, l, key)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	fmt.Println("token", lease.Token())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("error", err)
		return 2
	}
	err = correctness.NewRegister(client).Write(ctx, key, lease.Token(), []byte("child"))
	var stale *correctness.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("stale", stale.Token, stale.Highest)
		return 0
	}
	fmt.Println("accepted", err)
	return 1
}

// acquireLive acquires key with a short lease, 200 ms, that Redis still
// holds for the child when it asks. On a machine too loaded for that (the
// grant came back after its lease deadline, or the lease had expired by the
// time the child asked) it asks again for twice as long, up to 12.8 s.
func acquireLive(ctx context.Context, l *correctness.Locker, key string) (*correctness.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for ttl := 200 * time.Millisecond; ; ttl *= 2 {
		lease, err := l.Acquire(ctx, key, ttl)
		if err == nil {
			if _, err = lease.TTL(ctx); err == nil {
				return lease, nil
			}
			err = fmt.Errorf("lease not live before the pause: %w", err)
		}
		late := errors.Is(err, correctness.ErrLateGrant) || errors.Is(err, correctness.ErrNotHeld)
		if !late || ttl >= 12800*time.Millisecond {
			return nil, err
		}
	}
}

func TestPausedHolderSIGSTOP(t *testing.T) {
	b := redistest.Real(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, b)
	reg := correctness.NewRegister(b.Client)
	for run := range 20 {
		key := fmt.Sprintf("paused-%d", run)
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+b.Server.Addr+" "+key)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		var childToken uint64
		if !lines.Scan() {
			t.Fatalf("run %d: child said nothing", run)
		}
		if _, err := fmt.Sscanf(lines.Text(), "token %d", &childToken); err != nil {
			t.Fatalf("run %d: child said %q", run, lines.Text())
		}
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if err := proc.AwaitStopped(cmd.Process.Pid, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		// The child may write as soon as it runs again.
		if _, err := stdin.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
		// The child's lease expires while it is frozen; Acquire waits for that.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		lease, err := l.Acquire(ctx, key, time.Minute)
		cancel()
		if err != nil {
			t.Fatalf("run %d: Acquire: %v", run, err)
		}
		if lease.Token() <= childToken {
			t.Fatalf("run %d: parent token %d not above the child's %d", run, lease.Token(), childToken)
		}
		if err := reg.Write(t.Context(), key, lease.Token(), []byte("parent")); err != nil {
			t.Fatalf("run %d: parent write: %v", run, err)
		}
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("run %d: child said nothing after the pause", run)
		}
		want := fmt.Sprintf("stale %d %d", childToken, lease.Token())
		if got := lines.Text(); got != want {
			t.Fatalf("run %d: child's write: got %q, want %q", run, got, want)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run %d: child: %v", run, err)
		}
		v, tok, err := reg.Read(t.Context(), key)
		if err != nil || string(v) != "parent" || tok != lease.Token() {
			t.Fatalf("run %d: register holds %q, %d, %v; want the parent's value", run, v, tok, err)
		}
		_ = lease.Release(t.Context())
	}
}

func TestRestartWithoutPersistence(t *testing.T) {
	cases := []struct {
		name       string
		floor      bool
		wantHigher bool
	}{
		{"clock floor", true, true},
		{"counter alone", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Start(t)
			l := correctness.New(s.Client(t), correctness.WithClockFloor(tc.floor), correctness.WithLogger(quiet))
			defer l.Close()
			ctx := t.Context()
			var most uint64
			for range 5 {
				lease, err := l.TryAcquire(ctx, "restart", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				most = max(most, lease.Token())
				if err := lease.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
			lease, err := l.TryAcquire(ctx, "restart", time.Minute)
			if err != nil {
				t.Fatalf("TryAcquire after restart: %v", err)
			}
			if got := lease.Token() > most; got != tc.wantHigher {
				t.Fatalf("token after restart %d, before %d: got higher=%v, want %v", lease.Token(), most, got, tc.wantHigher)
			}
			fs, err := l.Audit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if f.Check == "persistence" && f.Status != correctness.StatusRisk {
					t.Errorf("persistence without AOF: got %v, want risk", f.Status)
				}
				if f.Check == "clock-floor" && (f.Status == correctness.StatusRisk) == tc.floor {
					t.Errorf("clock-floor with floor=%v: got %v", tc.floor, f.Status)
				}
			}
		})
	}
}

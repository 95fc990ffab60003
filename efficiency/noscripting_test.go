package efficiency_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasekit/leasekit/efficiency"
	"github.com/leasekit/leasekit/internal/testkit/redistest"
)

// TestServerWithoutScripting: on a redis-server whose EVALSHA and EVAL are
// renamed away (as a server without Lua refuses them), an uncontended
// acquire, which sends SET NX alone, still works; the first call that needs
// a script (a refresh, a release) fails with an error that names the cause
// and the lock, never a bare "unknown command", nor the arguments the
// server echoes after it (an owner id among them).
func TestServerWithoutScripting(t *testing.T) {
	s := redistest.Start(t, "--rename-command", "EVALSHA", "evalsha-renamed-away", "--rename-command", "EVAL", "eval-renamed-away")
	l := efficiency.New(s.Client(t))
	t.Cleanup(func() { _ = l.Close() })
	ctx := t.Context()
	lock, err := l.TryObtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain (SET NX alone): %v", err)
	}
	for name, call := range map[string]func() error{
		"Refresh": func() error { return lock.Refresh(ctx, time.Minute) },
		"Release": func() error { return lock.Release(ctx) },
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "the server runs no Lua scripts") || !strings.Contains(err.Error(), `"job"`) ||
			strings.Contains(err.Error(), "args") {
			t.Errorf("%s without scripting: %v, want an error naming the lock and the cause, and no argument (an owner id)", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

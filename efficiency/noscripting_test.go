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
// acquire, which sends SET NX alone, still works, and so do its refresh
// and release where the server has plain compare-and-set commands (SET
// IFEQ, DELEX or DELIFEQ); the first call that needs a script (TTL; a
// refresh and a release elsewhere) fails with an error that names the cause
// and the lock, never a bare "unknown command", nor the arguments the
// server echoes after it (an owner id among them).
func TestServerWithoutScripting(t *testing.T) {
	s := redistest.Start(t, "--rename-command", "EVALSHA", "evalsha-renamed-away", "--rename-command", "EVAL", "eval-renamed-away")
	c := s.Client(t)
	l := efficiency.New(c)
	t.Cleanup(func() { _ = l.Close() })
	ctx := t.Context()
	plain := plainServer(t, c)
	lock, err := l.TryObtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain (SET NX alone): %v", err)
	}
	for _, call := range []struct {
		name  string
		plain bool // the plain path serves it
		call  func() error
	}{
		{"TTL", false, func() error { _, err := lock.TTL(ctx); return err }},
		{"Refresh", true, func() error { return lock.Refresh(ctx, time.Minute) }},
		{"Release", true, func() error { return lock.Release(ctx) }},
	} {
		err := call.call()
		switch {
		case call.plain && plain:
			if err != nil {
				t.Errorf("%s without scripting, on a server with plain compare-and-set: %v, want it done", call.name, err)
			}
		case err == nil || !strings.Contains(err.Error(), "the server runs no Lua scripts") || !strings.Contains(err.Error(), `"job"`) ||
			strings.Contains(err.Error(), "args"):
			t.Errorf("%s without scripting: %v, want an error naming the lock and the cause, and no argument (an owner id)", call.name, err)
		default:
			t.Logf("%s: %v", call.name, err)
		}
	}
	if got := c.Exists(ctx, "leasekit:{job}").Val(); plain && got != 0 {
		t.Errorf("after Release the lock key exists (%d): want it deleted by the plain path", got)
	}
}

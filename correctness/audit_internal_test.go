package correctness

import (
	"errors"
	"testing"

	"github.com/leasekit/leasekit/internal/port"
)

// TestConfigValueShapes checks that CONFIG GET's reply is read as RESP2
// gives it (pairs) and as RESP3 does (a map), whichever the client speaks.
func TestConfigValueShapes(t *testing.T) {
	for _, r := range []port.Reply{
		{Val: []any{"appendonly", "yes"}},
		{Val: map[any]any{"appendonly": "yes"}},
		{Val: map[string]any{"appendonly": "yes"}},
	} {
		if v, err := configValue(r, "appendonly"); v != "yes" || err != nil {
			t.Errorf("%T: got %q, %v; want yes", r.Val, v, err)
		}
	}
	if _, err := configValue(port.Reply{Val: []any{}}, "appendonly"); err == nil {
		t.Error("an empty reply: got no error, want one naming the parameter")
	}
	cause := errors.New("NOPERM")
	if _, err := configValue(port.Reply{Err: cause}, "appendonly"); !errors.Is(err, cause) {
		t.Errorf("a refused CONFIG GET: got %v, want its error", err)
	}
}

package deps_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowed are the modules the library's go.mod may require, directly or
// indirectly, and why a user's build needs each.
var allowed = map[string]string{
	"github.com/redis/go-redis/v9":     "the client every lock speaks through",
	"github.com/cespare/xxhash/v2":     "go-redis's (and the OTel API's)",
	"go.uber.org/atomic":               "go-redis's",
	"golang.org/x/sys":                 "go-redis's",
	"go.opentelemetry.io/otel":         "the OTel API",
	"go.opentelemetry.io/otel/metric":  "the OTel API",
	"go.opentelemetry.io/otel/trace":   "the OTel API",
	"go.opentelemetry.io/otel/log":     "the OTel API's global logger",
	"go.opentelemetry.io/auto/sdk":     "the OTel API's global tracer",
	"github.com/go-logr/logr":          "the OTel API's global logger",
	"github.com/go-logr/stdr":          "the OTel API's global logger",
	"github.com/alicebob/miniredis/v2": "leasetest's server",
	"github.com/yuin/gopher-lua":       "miniredis's Lua",
	"github.com/go-co-op/gocron/v2":    "cron/gocronlock's scheduler",
	"github.com/robfig/cron/v3":        "gocron's",
	"github.com/google/uuid":           "gocron's",
	"github.com/jonboulle/clockwork":   "gocron's",
}

const module = "github.com/leasekit/leasekit"

// root is the library's module folder.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// goCmd runs the go command in the library's folder outside the workspace,
// as a module that requires leasekit sees it, and returns its output.
func goCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = root(t)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += "\n" + string(ee.Stderr)
		}
		t.Fatalf("go %s: %s", strings.Join(args, " "), msg)
	}
	return out
}

// TestGoModRequiresOnlyTheList: every module the library's go.mod
// requires, directly or indirectly, is in allowed, and every module in
// allowed is required (a stale entry would let its module back in
// unseen).
func TestGoModRequiresOnlyTheList(t *testing.T) {
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	if err := json.Unmarshal(goCmd(t, "mod", "edit", "-json"), &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Module.Path != module {
		t.Fatalf("read the go.mod of %s, want the library's", mod.Module.Path)
	}
	var required []string
	for _, r := range mod.Require {
		required = append(required, r.Path)
		if _, ok := allowed[r.Path]; !ok {
			how := "directly"
			if r.Indirect {
				how = "indirectly"
			}
			t.Errorf("the library's go.mod requires %s (%s), which is not in the list: a module that only tests need goes in internal/reliability/go.mod", r.Path, how)
		}
	}
	for path, why := range allowed {
		if !slices.Contains(required, path) {
			t.Errorf("the list allows %s (%s), which go.mod no longer requires: take it off the list", path, why)
		}
	}
}

// TestPackagesReachOnlyTheList: the library's packages, without their
// tests, import packages of no module outside allowed, through any path.
func TestPackagesReachOnlyTheList(t *testing.T) {
	out := goCmd(t, "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	reached := map[string]bool{}
	for _, path := range strings.Fields(string(out)) {
		reached[path] = true
	}
	if !reached["github.com/redis/go-redis/v9"] {
		t.Fatalf("go list -deps reached %v, without go-redis: not the library's packages", reached)
	}
	for path := range reached {
		if _, ok := allowed[path]; !ok && path != module {
			t.Errorf("the library's packages import a package of %s, which is not in the list", path)
		}
	}
}

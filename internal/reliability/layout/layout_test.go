// Package layout holds CONTRIBUTING.md's Layout table to the code, so that
// the map a newcomer reads cannot drift from the territory.
package layout_test

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/leasekit/leasekit/"

// row is a row of the Layout table: its folders, and the packages of this
// module that the packages in them may import (nil: none).
type row struct {
	folders []string
	imports []string
}

var code = regexp.MustCompile("`([^`]+)`")

// table reads the Layout table of CONTRIBUTING.md at root.
func table(t *testing.T, root string) []row {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		switch {
		case line == "## Layout":
			in = true
		case in && strings.HasPrefix(line, "## "):
			return rows
		case in && strings.HasPrefix(line, "| `"):
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			if len(cells) != 3 {
				t.Fatalf("CONTRIBUTING.md: a Layout row with %d cells, want 3 (folder, what it holds, imports): %q", len(cells), line)
			}
			var r row
			for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
				r.folders = append(r.folders, strings.TrimSuffix(m[1], "/"))
			}
			for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
				r.imports = append(r.imports, m[1])
			}
			rows = append(rows, r)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// pkg is what go list says of a package.
type pkg struct {
	ImportPath string
	Dir        string
	Imports    []string
	GoFiles    []string
}

// packages lists the packages of every module in the repository at root
// (the library's, and the bench's beside it), with go list in each module's
// folder: a pattern from the root does not reach into a nested module.
func packages(t *testing.T, root string) []pkg {
	t.Helper()
	var pkgs []pkg
	for _, dir := range moduleDirs(t, root) {
		cmd := exec.Command("go", "list", "-json", "./...")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for dec.More() {
			var p pkg
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

// moduleDirs are the folders under root that hold a go.mod.
func moduleDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.Name() == "go.mod" && !d.IsDir():
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 2 {
		t.Fatalf("found the modules %q, want the library's and the bench's", dirs)
	}
	return dirs
}

// rowOf returns the row whose folder holds the package at path (relative to
// the module), the longest folder that does.
func rowOf(rows []row, path string) (row, bool) {
	var best row
	bestLen := -1
	for _, r := range rows {
		for _, f := range r.folders {
			if (path == f || strings.HasPrefix(path, f+"/")) && len(f) > bestLen {
				best, bestLen = r, len(f)
			}
		}
	}
	return best, bestLen >= 0
}

// TestLayoutMatchesTheCode: every package of the modules lies in a folder of
// CONTRIBUTING.md's Layout table, every folder there exists, and no
// package's non-test code imports a package of this module that its row
// does not list.
func TestLayoutMatchesTheCode(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	rows := table(t, root)
	if len(rows) < 8 {
		t.Fatalf("read %d rows of the Layout table, want the whole table", len(rows))
	}
	for _, r := range rows {
		for _, f := range r.folders {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("the Layout table lists %s/, which does not exist", f)
			}
		}
	}
	for _, p := range packages(t, root) {
		path := strings.TrimPrefix(p.ImportPath, module)
		if p.ImportPath == strings.TrimSuffix(module, "/") {
			path = "."
		}
		r, ok := rowOf(rows, path)
		if !ok {
			t.Errorf("%s is in no folder of the Layout table", path)
			continue
		}
		for _, imp := range p.Imports {
			own, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if !slices.ContainsFunc(r.imports, func(allowed string) bool { return own == allowed || strings.HasPrefix(own, allowed+"/") }) {
				t.Errorf("%s imports %s, which its Layout row does not list (%v)", path, own, r.imports)
			}
		}
	}
}

// benchOnly are the modules that only the bench needs: the chart's, and the
// peer lock libraries it compares leasekit with.
var benchOnly = []string{
	"gonum.org/v1/plot",
	"github.com/go-redsync/redsync/v4",
	"github.com/bsm/redislock",
	"github.com/redis/rueidis",
}

// TestLibraryLeavesTheBenchOut: the root's go.mod requires none of the
// bench's own modules, so that a module requiring leasekit never resolves
// them; they belong in bench/go.mod (CONTRIBUTING.md, "Two modules").
func TestLibraryLeavesTheBenchOut(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Module  struct{ Path string }
		Require []struct{ Path string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Module.Path != strings.TrimSuffix(module, "/") {
		t.Fatalf("read the go.mod of %s, want the library's", mod.Module.Path)
	}
	for _, r := range mod.Require {
		if slices.Contains(benchOnly, r.Path) {
			t.Errorf("the library's go.mod requires %s, which only the bench needs: require it in bench/go.mod", r.Path)
		}
	}
}

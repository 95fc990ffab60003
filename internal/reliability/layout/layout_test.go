// Package layout holds CONTRIBUTING.md's Layout table to the code, so that
// the map a newcomer reads cannot drift from the territory.
package layout_test

import (
	"bufio"
	"encoding/json"
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

// packages lists the module's packages from root, with go list.
func packages(t *testing.T, root string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
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

// TestLayoutMatchesTheCode: every package of the module lies in a folder of
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

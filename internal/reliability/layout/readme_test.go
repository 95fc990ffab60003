package layout_test

import (
	"os"
	"path/filepath"
	"testing"
)

// readmeBudget is the most the README may weigh: a front door, whose
// detail lives in docs/ and the package docs, linked from it.
const readmeBudget = 14 << 10 // 14 KiB

// TestREADMEFitsItsBudget: README.md is at most readmeBudget bytes.
func TestREADMEFitsItsBudget(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(readme) > readmeBudget {
		t.Errorf("README.md: got %d bytes, want at most %d: move detail to docs/ and link to it", len(readme), readmeBudget)
	}
}

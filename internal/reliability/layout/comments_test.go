package layout_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// commentWidth is the widest a line of prose in a comment may be, in
// columns, a tab counted as tabWidth: comments are reflowed to it, so that
// a diff of one changes the lines it means to.
const (
	commentWidth = 80
	tabWidth     = 4
)

// TestCommentsAreReflowed holds every line of prose in the comments of the
// Go files and the Lua scripts' headers to commentWidth. A doc comment's
// code block (a line indented past "// "), an example's output, a line that
// holds a URL, and a line of one word are not prose, and may be wider.
func TestCommentsAreReflowed(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var wide []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		var marker string
		switch filepath.Ext(path) {
		case ".go":
			marker = "//"
		case ".lua":
			marker = "--"
		default:
			return nil
		}
		found, err := wideProse(path, marker)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, f := range found {
			wide = append(wide, rel+":"+f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(wide) > 0 {
		t.Errorf("%d comment lines are wider than %d columns (a tab is %d): reflow them\n%s",
			len(wide), commentWidth, tabWidth, strings.Join(wide, "\n"))
	}
}

// wideProse returns "line: width" for each line of prose in the comments of
// the file at path, whose comments start with marker, wider than
// commentWidth.
func wideProse(path, marker string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	output := false // in an example's output, which is what it prints
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		text, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), marker)
		switch {
		case !ok:
			output = false
			continue
		case marker == "//" && (strings.TrimSpace(text) == "Output:" || strings.TrimSpace(text) == "Unordered output:"):
			output = true
		}
		if output || !prose(text) {
			continue
		}
		if w := width(line); w > commentWidth {
			out = append(out, fmt.Sprintf("%d: %d columns", n, w))
		}
	}
	return out, s.Err()
}

// prose reports whether text, a comment line after its marker, is a line of
// prose: one space, then words, and no URL.
func prose(text string) bool {
	body, ok := strings.CutPrefix(text, " ")
	if !ok || body == "" || body[0] == ' ' || body[0] == '\t' {
		return false
	}
	return strings.Contains(body, " ") && !strings.Contains(body, "://")
}

// width is line's width in columns, a tab taking tabWidth.
func width(line string) int {
	return utf8.RuneCountInString(line) + strings.Count(line, "\t")*(tabWidth-1)
}

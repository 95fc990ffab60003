package layout_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetImports are the packages the README's and docs' Go blocks may use,
// as a user pasting them would import them.
var snippetImports = map[string]string{
	"context":     "context",
	"errors":      "errors",
	"time":        "time",
	"testing":     "testing",
	"redis":       "github.com/redis/go-redis/v9",
	"gocron":      "github.com/go-co-op/gocron/v2",
	"clientv3":    "go.etcd.io/etcd/client/v3",
	"efficiency":  "github.com/leasekit/leasekit/efficiency",
	"correctness": "github.com/leasekit/leasekit/correctness",
	"gocronlock":  "github.com/leasekit/leasekit/cron/gocronlock",
	"leasetest":   "github.com/leasekit/leasekit/leasetest",
	"etcdtokens":  "github.com/leasekit/leasekit/correctness/etcdtokens",
	"rueidis":     "github.com/redis/rueidis",
	"rueidisconn": "github.com/leasekit/leasekit/efficiency/rueidisconn",
}

// What the Go blocks assume their reader has, by file and block, in
// order: declarations made before each block runs.
const (
	hasCtx       = "var ctx context.Context\n"
	hasClient    = "var client *redis.Client\n"
	hasEfficient = hasCtx + hasClient + "var locker *efficiency.Locker\n"
	hasCorrect   = hasCtx + hasClient + "var locker *correctness.Locker\nvar reg *correctness.Register\n" +
		"var hostname string\nvar plan func(context.Context) []byte\n"
)

var snippetContext = map[string][]string{
	"README.md": {
		"",
		hasEfficient,
		hasEfficient + "var reindex func(context.Context) error\n",
		hasEfficient + "var runImport func(context.Context) error\n",
		hasCtx + hasClient + "var compute func(context.Context, []byte) []byte\n",
		hasCorrect,
		hasClient,
		hasClient,
		"", // a test function, at file level
		hasEfficient,
	},
	"docs/compat.md":    {""},
	"docs/election.md":  {hasCorrect},
	"docs/fencing.md":   {"var endpoints []string\nvar rdb *redis.Client\n"},
	"docs/semaphore.md": {hasEfficient + "var runImport func(context.Context) error\n"},
}

// goBlock matches a Go code block of a Markdown file.
var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

// TestSnippetsCompile type-checks every Go block of the README and docs/ as
// a reader pastes it: statements into a function (after the declarations
// snippetContext says the block assumes), or a function at file level,
// with the imports its packages need. Only the complaints a fragment
// always earns (a variable or import it leaves unused) are let pass.
func TestSnippetsCompile(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	checked := 0
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlock.FindAllStringSubmatch(string(src), -1)
		if want := snippetContext[rel]; len(blocks) != len(want) {
			t.Errorf("%s has %d Go blocks, snippetContext lists %d: say what each block assumes", rel, len(blocks), len(want))
			continue
		}
		for i, b := range blocks {
			name := fmt.Sprintf("%s, Go block %d", rel, i+1)
			if err := checkSnippet(fset, imp, name, snippetContext[rel][i], b[1]); err != nil {
				t.Errorf("%s does not compile as pasted:\n%v\n%s", name, err, b[1])
			}
			checked++
		}
	}
	t.Logf("%d Go blocks checked", checked)
}

// checkSnippet type-checks block, with the declarations before.
func checkSnippet(fset *token.FileSet, imp types.Importer, name, before, block string) error {
	var src strings.Builder
	src.WriteString("package snippet\n\nimport (\n")
	for id, path := range snippetImports {
		fmt.Fprintf(&src, "\t%s %q\n", id, path)
	}
	src.WriteString(")\n\n")
	if strings.HasPrefix(block, "func ") {
		src.WriteString(block)
	} else {
		src.WriteString("func snippet() error {\n" + before + block + "\nreturn nil\n}\n")
	}
	f, err := parser.ParseFile(fset, name, src.String(), parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	var errs []string
	conf := types.Config{Importer: imp, Error: func(err error) {
		msg := err.Error()
		if strings.Contains(msg, "declared and not used") || strings.Contains(msg, "and not used") && strings.Contains(msg, "imported") {
			return
		}
		errs = append(errs, msg)
	}}
	_, _ = conf.Check("snippet", fset, []*ast.File{f}, nil)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// Package twins checks that efficiency and correctness, two faces of one
// engine, document their mirrored names alike: TryObtain and TryAcquire,
// Obtain and Acquire, Lock and Lease, and every name both export. A doc may
// instead point to its twin with a doc link and say only what differs; then
// the link must resolve, and the pointer must stay shorter than its twin.
package twins_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// renamed maps correctness's words to efficiency's, in names and in doc text.
var renamed = []struct{ from, to string }{
	{"TryAcquire", "TryObtain"},
	{"Acquire", "Obtain"},
	{"acquires", "obtains"},
	{"Leases", "Locks"},
	{"Lease", "Lock"},
	{"correctness", "efficiency"},
}

var words = func() []*regexp.Regexp {
	res := make([]*regexp.Regexp, len(renamed))
	for i, r := range renamed {
		res[i] = regexp.MustCompile(`\b` + r.from + `\b`)
	}
	return res
}()

var space = regexp.MustCompile(`\s+`)

// normal is text with correctness's words swapped for efficiency's and each
// run of white space made one space.
func normal(text string) string {
	text = space.ReplaceAllString(text, " ")
	for i, re := range words {
		text = re.ReplaceAllString(text, renamed[i].to)
	}
	return text
}

// difference is an intended difference between the docs of a name's twins:
// phrase e in efficiency's stands for phrase c in correctness's (either may be
// empty), and both are cut before the docs are compared. Both are written as
// in the source. Twins of which one links to the other are not compared, and
// need none (see pointer).
type difference struct {
	name string // efficiency's
	e, c string
	why  string
}

var intended = []difference{
	{"Locker", "", ", each with a fencing token", "a correctness grant carries a token"},
	{"Lock", "", " with its fencing token", "a correctness grant carries a token"},
	{"Lock.Refresh", "", "; the token does not change", "a correctness grant carries a token"},
	{"New", "", " It also panics if WithExpiringCounter is set while WithClockFloor(false) is: without the clock floor an expired counter would start tokens again from 1.",
		"only correctness has these options"},
	{"Option", "", " or a Register", "correctness's options also configure a Register"},
	{"WithPrefix", "the Locker uses", "the Locker or Register uses", "correctness's options also configure a Register"},
	{"WithPrefix", "", ", its token counter at <prefix>{name}:fence, and the register of a resource at <prefix>{resource}:register",
		"only correctness has these keys"},
	{"WithMeterProvider", "Locker's metrics go (see the package doc for what it measures)",
		"Locker's (or the Register's) metrics go (see the package doc for what they measure)", "correctness's options also configure a Register"},
	{"WithLogger", "for warnings", "for the audit's findings and for warnings", "only correctness has the audit"},
	{"WithLogger", "Default: none.", "Default: slog.Default(), because the audit's warnings are the point: pass a logger with a discarding handler, or WithAudit(false), to silence them.",
		"only correctness has the audit, whose warnings must be seen"},
	{"WithOwnerSource", `both "obtain" the same lock, and either can release or refresh the other's`,
		"both acquire the same lock with the same token, which every fence accepts from both", "what shared owner ids break differs"},
	{"ErrLateGrant", "", ", nor use its token", "a correctness grant carries a token"},
	{"ErrLockLost", "Do, Hold or Once", "Do or Hold", "correctness has no Once"},
	{"ErrClosed", "TryObtain, Obtain, Do and Once", "TryAcquire, Acquire and Do", "correctness has no Once"},
	{"ErrClosed", " (and every acquire of its Semaphores)", "", "correctness has no semaphores"},
	{"ErrNotObtained", ", or a Semaphore's TryAcquire found every permit held", "", "correctness has no semaphores"},
	{"ErrTaken", " (or a Semaphore's TryAcquire found every permit held)", "", "correctness has no semaphores"},
	{"Lock", ", or a permit of a Semaphore", "", "correctness has no semaphores"},
	{"Lock.Key", "; a permit's is its semaphore's, <prefix>{name}:permits", "", "correctness has no semaphores"},
	{"ErrInvalidKey", "", " or resource", "the fences take resource names"},
	{"ErrInvalidTTL", " or period", "", "only efficiency has Once, which takes a period"},
}

// efficiencyOnly are efficiency's names without a twin, and why.
var efficiencyOnly = map[string]string{
	"Locker.Once":          "a run once per period needs no fencing token: it keeps others out, it guards no write",
	"Locker.Semaphore":     semaphores,
	"Semaphore":            semaphores,
	"Semaphore.TryAcquire": semaphores,
	"Semaphore.Acquire":    semaphores,
	"Semaphore.Do":         semaphores,
	"ErrInvalidLimit":      semaphores,
	"ErrLimitMismatch":     semaphores,
	"Semaphore.Inspect":    semaphores,
	"SemaphoreInfo":        semaphores,
}

// semaphores is why efficiency's semaphore names have no twins.
const semaphores = "N holders at once cannot be fenced by one newest-token rule (efficiency's package doc)"

// module is the import path both faces live under.
const module = "github.com/leasekit/leasekit/"

func TestTwinsStayTwins(t *testing.T) {
	eff := read(t, "efficiency")
	cor := read(t, "correctness")
	checkLinks(t, eff, cor)
	checkLinks(t, cor, eff)
	twin := make(map[string]string) // efficiency's name → correctness's
	for name := range cor.docs {
		twin[normal(name)] = name
	}
	used := make([]bool, len(intended))
	for name, e := range eff.docs {
		cname, ok := twin[name]
		if !ok {
			if _, listed := efficiencyOnly[name]; !listed {
				t.Errorf("efficiency.%s has no twin in correctness, and efficiencyOnly does not say why", name)
			}
			continue
		}
		c := cor.docs[cname]
		if pointer(t, eff, name, cor, cname) || pointer(t, cor, cname, eff, name) {
			for i, d := range intended {
				if d.name == name {
					used[i] = true
					t.Errorf("%s: the twins' docs no longer restate each other (one points to the other), so the intended difference %q / %q (%s) is moot; drop it from the list",
						name, d.e, d.c, d.why)
				}
			}
			continue
		}
		e, c = normal(strings.TrimSpace(e)), normal(strings.TrimSpace(c))
		for i, d := range intended {
			if d.name != name {
				continue
			}
			used[i] = true
			de, dc := normal(d.e), normal(d.c)
			if !strings.Contains(e, de) || !strings.Contains(c, dc) {
				t.Errorf("%s: the intended difference %q / %q (%s) is no longer in the docs; update the list", name, d.e, d.c, d.why)
				continue
			}
			e, c = cut(e, de), cut(c, dc)
		}
		if e != c {
			t.Errorf("%s: the docs of the twins differ%s", name, drift(e, c))
		}
	}
	for i, d := range intended {
		if !used[i] {
			t.Errorf("%s: an intended difference for a name that has no twins", d.name)
		}
	}
	for name := range efficiencyOnly {
		if _, ok := twin[name]; ok {
			t.Errorf("efficiency.%s is listed in efficiencyOnly, but correctness has it", name)
		}
	}
	if len(eff.docs) < 25 {
		t.Fatalf("read the docs of %d names of efficiency, want its whole API", len(eff.docs))
	}
}

// pointer reports whether from's doc of name points to its twin, to's doc of
// twin, with a doc link, and so need not restate it. Such a doc starts with
// its own name, as every doc does, and says only what differs: it must be
// shorter than its twin's, or it is a restatement that escapes the
// comparison.
func pointer(t *testing.T, from *face, name string, to *face, twin string) bool {
	t.Helper()
	found := false
	for _, l := range links(from.pkg, from.docs[name]) {
		if l.ImportPath == to.path && target(l) == twin {
			found = true
		}
	}
	if !found {
		return false
	}
	short := name[strings.LastIndex(name, ".")+1:]
	if doc := from.docs[name]; !strings.HasPrefix(doc, short+" ") {
		t.Errorf("%s.%s: its doc points to its twin, but does not start with %q: %q", from.pkg.Name, name, short, first(doc))
	}
	if n, m := len(strings.Fields(from.docs[name])), len(strings.Fields(to.docs[twin])); n >= m {
		t.Errorf("%s.%s points to %s.%s for what they share, but restates it: %d words against its twin's %d",
			from.pkg.Name, name, to.pkg.Name, twin, n, m)
	}
	return true
}

// first is the first line of doc.
func first(doc string) string {
	line, _, _ := strings.Cut(doc, "\n")
	return line
}

// bracketed is what a doc link to the other face looks like in the source.
var bracketed = regexp.MustCompile(`\[\*?(?:[\w./]+/)?(?:efficiency|correctness)\.[\w.]+\]`)

// checkLinks checks every doc link in from's docs (its package doc included)
// that points into to: it must name an exported name of to, so that a pointer
// from one twin to the other cannot rot when a name is renamed or removed. A
// link that go/doc does not take for one, such as [efficiency.Locker.Obtain]
// in a package that does not import efficiency, is an error too: go doc and
// pkg.go.dev would print its brackets. Such a link needs the import path,
// [github.com/leasekit/leasekit/efficiency.Locker.Obtain].
func checkLinks(t *testing.T, from, to *face) {
	t.Helper()
	texts := map[string]string{"package " + from.pkg.Name: from.pkg.Doc}
	for name, doc := range from.docs {
		texts[from.pkg.Name+"."+name] = doc
	}
	for name, doc := range texts {
		for _, l := range links(from.pkg, doc) {
			if l.ImportPath != to.path {
				continue
			}
			if _, ok := to.docs[target(l)]; !ok {
				t.Errorf("%s: the doc link to %s.%s names nothing %s exports", name, to.pkg.Name, target(l), to.pkg.Name)
			}
		}
		for _, p := range plain(from.pkg, doc) {
			for _, m := range bracketed.FindAllString(p, -1) {
				t.Errorf("%s: %s is not a doc link (go doc prints it as it is): name the package by its import path, as in %s",
					name, m, strings.Replace(m, "[", "["+module, 1))
			}
		}
	}
}

// target is the name a doc link points to, as docs keys it: Name, or
// Recv.Name for a method.
func target(l *comment.DocLink) string {
	if l.Recv != "" {
		return l.Recv + "." + l.Name
	}
	return l.Name
}

// links returns the doc links of doc, as go doc parses it in pkg.
func links(pkg *doc.Package, text string) []*comment.DocLink {
	var out []*comment.DocLink
	walk(pkg, text, func(x comment.Text) {
		if l, ok := x.(*comment.DocLink); ok {
			out = append(out, l)
		}
	})
	return out
}

// plain returns the plain text of doc, as go doc parses it in pkg: what is
// neither a link nor code.
func plain(pkg *doc.Package, text string) []string {
	var out []string
	walk(pkg, text, func(x comment.Text) {
		if p, ok := x.(comment.Plain); ok {
			out = append(out, string(p))
		}
	})
	return out
}

// walk calls fn for each text element of doc's paragraphs, headings and
// list items, links included but not their own text.
func walk(pkg *doc.Package, text string, fn func(comment.Text)) {
	var blocks func([]comment.Block)
	texts := func(xs []comment.Text) {
		for _, x := range xs {
			fn(x)
		}
	}
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				texts(b.Text)
			case *comment.Heading:
				texts(b.Text)
			case *comment.List:
				for _, item := range b.Items {
					blocks(item.Content)
				}
			}
		}
	}
	blocks(pkg.Parser().Parse(text).Content)
}

// cut removes the first phrase from text.
func cut(text, phrase string) string {
	if phrase == "" {
		return text
	}
	return strings.TrimSpace(space.ReplaceAllString(strings.Replace(text, phrase, "", 1), " "))
}

// drift shows where two texts part: the words after their common start,
// up to their common end.
func drift(e, c string) string {
	ew, cw := strings.Fields(e), strings.Fields(c)
	i := 0
	for i < len(ew) && i < len(cw) && ew[i] == cw[i] {
		i++
	}
	j := 0
	for j < len(ew)-i && j < len(cw)-i && ew[len(ew)-1-j] == cw[len(cw)-1-j] {
		j++
	}
	return ", after " + quote(ew[max(0, i-5):i]) +
		":\n\tefficiency:  " + quote(ew[i:len(ew)-j]) +
		"\n\tcorrectness: " + quote(cw[i:len(cw)-j]) + " (with efficiency's words)"
}

func quote(words []string) string { return `"` + strings.Join(words, " ") + `"` }

// face is what the twins test reads of one face: its package as go/doc sees
// it, and the doc comment of every exported name.
type face struct {
	path string // import path
	pkg  *doc.Package
	docs map[string]string
}

// read reads the face called dir, a folder at the module's root: the doc
// comment of every exported name of its non-test files, keyed as functions,
// types, methods as Type.Method, and each variable and constant.
func read(t *testing.T, dir string) *face {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join("../../..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	d, err := doc.NewFromFiles(fset, files, module+dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, n := range vs.Names {
					if n.IsExported() {
						out[n.Name] = vs.Doc.Text()
					}
				}
			}
		}
	}
	values(d.Consts)
	values(d.Vars)
	for _, f := range d.Funcs {
		out[f.Name] = f.Doc
	}
	for _, typ := range d.Types {
		out[typ.Name] = typ.Doc
		values(typ.Consts)
		values(typ.Vars)
		for _, f := range typ.Funcs {
			out[f.Name] = f.Doc
		}
		for _, m := range typ.Methods {
			out[typ.Name+"."+m.Name] = m.Doc
		}
	}
	if len(out) == 0 {
		t.Fatalf("read no docs in %s", dir)
	}
	return &face{path: module + dir, pkg: d, docs: out}
}

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Size limits a reader can hold in their head (issue 37): a production
// file of at most maxFileLines lines, a function of at most maxFuncLines,
// but for the route table, which is best read whole.
const (
	maxFileLines = 500
	maxFuncLines = 80
)

var longAllowed = map[string]bool{"web/backoffice/routes.go Mount": true} // the back office's route table

// Every hand-written production Go file (not tests, not templ's output,
// not the npm folders; the bench programs too) is held to the limits; the
// message names the file or function and how long it is.
func TestNoFileOrFunctionTooLongToRead(t *testing.T) {
	t.Parallel()
	root := "../.."
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_templ.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it by meaning", rel, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFuncLines && !longAllowed[filepath.ToSlash(rel)+" "+fn.Name.Name] {
				t.Errorf("%s: func %s has %d lines (at most %d)", rel, fn.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: the walk missed the tree", checked)
	}
}

// The templ sources are held to the same limits, each component as a
// function, and hold one page each (one component that lays out a whole
// page with @Layout), so that a page is found by its file.
func TestEveryTemplFileIsOnePageAReaderCanHold(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../views/*.templ")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d templ files found (%v)", len(files), err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		lines := strings.Split(string(raw), "\n")
		if n := len(lines); n > maxFileLines {
			t.Errorf("%s has %d lines (at most %d): split it by meaning", name, n, maxFileLines)
		}
		var pages []string
		comp, start := "", 0
		for i, l := range lines {
			if comp == "" && (strings.HasPrefix(l, "templ ") || strings.HasPrefix(l, "func ")) {
				comp, start = strings.Fields(strings.NewReplacer("(", " ").Replace(l))[1], i
			}
			if comp != "" && strings.Contains(l, "@Layout(") {
				pages = append(pages, comp)
			}
			if comp != "" && l == "}" {
				if n := i - start + 1; n > maxFuncLines {
					t.Errorf("%s: %s has %d lines (at most %d)", name, comp, n, maxFuncLines)
				}
				comp = ""
			}
		}
		if len(pages) > 1 {
			t.Errorf("%s holds %d pages (%s): one page a file", name, len(pages), strings.Join(pages, ", "))
		}
	}
}

// The web side, the channels, the tools file's set and the outbox start no
// goroutine of their own: their background work (live pages, shared rate
// limits, the audit chain's check, Slack's clicks, the MCP servers'
// keepers, following their tool lists) runs as the core's named jobs,
// which Start starts and Close stops (issue 65).
func TestOnlyTheCoreStartsBackgroundWork(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	var files []string
	// The web side and its doors, the channels, the tools file's set, the
	// outbox and the businesses: their background work is the core's jobs
	// (Core.Job, outbox.Job, the set's keepers, followTools).
	for _, glob := range []string{"web/*.go", "web/*/*.go", "channels/*/*.go", "tools/httptool/*.go", "agent/outbox/*.go", "agent/business/*.go", "demo/*.go", "demo/*/*.go"} {
		more, _ := filepath.Glob("../../" + glob)
		files = append(files, more...)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, "_templ.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: a goroutine started outside the core's jobs", fset.Position(g.Pos()))
			}
			return true
		})
	}
}

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
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

var longAllowed = map[string]bool{"web/routes.go routes": true}

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

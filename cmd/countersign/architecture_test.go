package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ARCHITECTURE.md is true of the tree: every path it names exists (a
// pattern such as agent/gate/*_test.go matches something), and every file
// it names by its name alone is somewhere in the repository.
func TestArchitectureNamesOnlyWhatExists(t *testing.T) {
	t.Parallel()
	root := "../.."
	md, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	top := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if rel, _ := filepath.Rel(root, path); d.IsDir() && rel != "." && !strings.Contains(rel, string(filepath.Separator)) {
			top[rel] = true
		}
		names[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// MCP's methods look like paths; a Go name may follow a package's path
	// (web/webtest.New); a line range may follow a file (x.go:12-40).
	methods := regexp.MustCompile(`^(tools|prompts|resources|completion|notifications|sampling|elicitation|roots|server|tasks|subscriptions)/[a-z_/]+$`)
	goName := regexp.MustCompile(`\.[A-Z]\w*$`)
	lines := regexp.MustCompile(`:\d+(-\d+)?$`)
	file := regexp.MustCompile(`^[\w.-]+\.(go|templ|js|css|sql|yaml|mjs|md)$`)
	checked := 0
	for n, line := range strings.Split(string(md), "\n") {
		for _, m := range regexp.MustCompile("`([^`\\s]+)`").FindAllStringSubmatch(line, -1) {
			tok := lines.ReplaceAllString(strings.TrimRight(m[1], ":,."), "")
			switch first, _, _ := strings.Cut(tok, "/"); {
			case strings.Contains(tok, "/") && top[first] && !methods.MatchString(tok):
				checked++
				if found, _ := filepath.Glob(filepath.Join(root, goName.ReplaceAllString(tok, ""))); len(found) == 0 {
					t.Errorf("ARCHITECTURE.md:%d names %s, which is not in the repository", n+1, tok)
				}
			case file.MatchString(tok):
				checked++
				if !names[tok] {
					t.Errorf("ARCHITECTURE.md:%d names the file %s; no file has that name", n+1, tok)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d paths checked in ARCHITECTURE.md", checked)
	}
}

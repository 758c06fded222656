package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// `countersign version` says which build this is, and whether its SQLite
// has FTS5 (the test binary is built like the server, with the tag).
func TestVersionSaysWhatWasBuilt(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, strings.NewReader(""), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if !strings.HasPrefix(line, "countersign ") || !strings.Contains(line, "go1.") || !strings.Contains(line, "SQLite FTS5: ") {
		t.Fatalf("version: %q", line)
	}
	if os.Getenv("CI") == "true" && !strings.Contains(line, "SQLite FTS5: yes") {
		t.Fatalf("CI builds with -tags sqlite_fts5, yet: %q", line)
	}
	// A test binary, like go run, records no commit: it says why and what
	// records one; a commit given at build time is named.
	if !strings.Contains(line, "commit unknown (the build recorded none") {
		t.Errorf("a build with no commit recorded: %q", line)
	}
	builtCommit = "0123456789abcdef"
	defer func() { builtCommit = "" }()
	if line := versionLine(); !strings.Contains(line, "commit 0123456789ab,") {
		t.Errorf("a build given its commit: %q", line)
	}
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"serve", "--log-level", "loud"}, strings.NewReader(""), io.Discard, &errOut)
	if err == nil || !strings.Contains(err.Error(), "choose debug, info, warn or error") {
		t.Fatalf("serve --log-level loud: %v", err)
	}
}

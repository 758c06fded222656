package main

import (
	"cmp"
	"runtime/debug"
	"strings"

	"github.com/countersign/countersign/models/storage"
)

// versionLine says which Countersign this is: its module version (a tag, or
// "devel" for a build from a checkout), the commit it was built from and
// whether that checkout had changes, the Go release, and whether its SQLite
// driver has FTS5 (the sqlite_fts5 build tag), which the audit search uses.
func versionLine() string {
	version, commit, at, modified, goVersion := buildInfo()
	if len(commit) > 12 {
		commit = commit[:12]
	}
	parts := []string{"countersign " + version, "commit " + commit}
	if commit == "unknown" {
		parts[1] += " (the build recorded none: go run and builds outside a git checkout do not; go build in a clone does, or -ldflags \"-X main.builtCommit=SHA\")"
	}
	if modified {
		parts[1] += " (with uncommitted changes)"
	}
	if at != "" {
		parts = append(parts, "committed "+at)
	}
	if goVersion != "" {
		parts = append(parts, goVersion)
	}
	fts := "SQLite FTS5: yes"
	if !storage.SQLiteHasFTS5() {
		fts = "SQLite FTS5: no (built without -tags " + storage.BuildTag + ": the audit search reads every call)"
	}
	return strings.Join(append(parts, fts), ", ")
}

// release is this binary's version as traces name it: the module version
// and the commit ("devel+0123456789ab").
func release() string {
	version, commit, _, _, _ := buildInfo()
	return version + "+" + commit[:min(12, len(commit))]
}

// builtCommit is the commit a build outside a git checkout was made from,
// when it says so (-ldflags "-X main.builtCommit=SHA": the Dockerfile's
// COMMIT); the toolchain's own record of a checkout wins.
var builtCommit string

// buildInfo is what the Go toolchain recorded of the build.
func buildInfo() (version, commit, at string, modified bool, goVersion string) {
	version, commit = "devel", cmp.Or(builtCommit, "unknown")
	if info, ok := debug.ReadBuildInfo(); ok {
		goVersion = info.GoVersion
		if v := info.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	return version, commit, at, modified, goVersion
}

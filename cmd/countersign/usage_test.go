package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commands are every command that takes flags, as the usage names them.
var commands = []string{"serve", "user add", "token create", "token revoke", "agent add", "agent list",
	"agent revoke", "agent limits", "policy people", "mcp", "policy test", "policy replay", "audit verify", "audit checkpoint", "audit keygen", "evidence verify",
	"receipts rotate-key", "backup"}

// flagsOf is the flags a command takes, as its -h lists them.
func flagsOf(t *testing.T, command string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append(strings.Fields(command), "-h"), strings.NewReader(""), &stdout, &stderr)
	if ex, ok := err.(exitError); !ok || ex.code != 0 {
		t.Fatalf("%s -h: %v (want exit 0)\n%s", command, err, stderr.String())
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`).FindAllStringSubmatch(stderr.String(), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s -h lists no flags:\n%s", command, stderr.String())
	}
	return out
}

// block is the lines of a usage text about one command: its line and the
// lines under it up to the next command.
func block(text, command string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "countersign ") {
			rest := strings.TrimPrefix(trimmed, "countersign ")
			in = rest == command || strings.HasPrefix(rest, command+" ") ||
				// "agent list | agent revoke NAME" names two.
				strings.Contains(rest, "| "+command)
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

var flagWord = regexp.MustCompile(`--([a-z][a-z-]*[a-z])`)

// holdsFlags says what a usage block lacks of a command's flags, and what
// it names that the command does not take.
func holdsFlags(t *testing.T, where, text, command string, flags []string, except ...string) {
	t.Helper()
	b := block(text, command)
	if b == "" {
		t.Errorf("%s has no line for `countersign %s`", where, command)
		return
	}
	var named []string
	for _, m := range flagWord.FindAllStringSubmatch(b, -1) {
		named = append(named, m[1])
	}
	for _, f := range flags {
		if !slices.Contains(named, f) && !slices.Contains(except, f) {
			t.Errorf("%s: `countersign %s` does not list --%s", where, command, f)
		}
	}
	for _, n := range named {
		if !slices.Contains(flags, n) {
			t.Errorf("%s: `countersign %s` lists --%s, which it does not take", where, command, n)
		}
	}
}

// The usage lists every flag of every command, and so does the Commands
// block of docs/reference/commands.md (which says once which commands take --db); neither
// lists a flag that is not there.
func TestUsageAndReadmeListEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../docs/reference/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)# Commands\n\n```\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("docs/reference/commands.md has no Commands block")
	}
	commandsBlock := string(m[1])
	if !strings.Contains(string(readme), "Every command that reads the database (all but `mcp`, `policy test` and `evidence verify`) takes\n`--db`") {
		t.Fatal("docs/reference/commands.md no longer says that every command takes --db")
	}
	for _, c := range commands {
		flags := flagsOf(t, c)
		holdsFlags(t, "usage", usage, c, flags)
		holdsFlags(t, "README", commandsBlock, c, flags, "db")
	}
}

// An environment variable fills a flag not given on the command line; the
// command line wins; a bad value is refused naming the variable.
func TestFlagsFromTheEnvironment(t *testing.T) {
	fs, cfg := newFlagSet("serve", &bytes.Buffer{})
	cfg.policyFlag(fs)
	t.Setenv("COUNTERSIGN_DB", "from-env.db")
	t.Setenv("COUNTERSIGN_POLICY", "env-policy.yaml")
	if err := parse(fs, []string{"--policy", "flag-policy.yaml"}); err != nil {
		t.Fatal(err)
	}
	if cfg.DB != "from-env.db" || cfg.Policy != "flag-policy.yaml" {
		t.Fatalf("db %q policy %q", cfg.DB, cfg.Policy)
	}
	var stderr bytes.Buffer
	t.Setenv("COUNTERSIGN_MODEL_TIMEOUT", "soon")
	err := run(context.Background(), []string{"serve"}, strings.NewReader(""), &bytes.Buffer{}, &stderr)
	if ex, ok := err.(exitError); !ok || ex.code != 2 || !strings.HasPrefix(ex.msg, "COUNTERSIGN_MODEL_TIMEOUT: ") {
		t.Fatalf("a bad COUNTERSIGN_MODEL_TIMEOUT: %#v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// readmeBlock is one of the shell blocks of the README or a document of
// docs/, and what the comment above it says of it.
type readmeBlock struct {
	file   string // README.md, docs/…
	line   int
	text   string
	notRun string // why the doc test does not run it ("": it runs)
	serves string // a block that keeps running: the address that answers once it is up
	stops  bool   // the servers started before it are stopped first, as a reader would
}

var readmeMark = regexp.MustCompile(`^<!-- (doctest: (serves (\S+)|stops the servers before it)|not run by the doc test: (.+)) -->$`)

// readmeBlocks reads the shell blocks of a Markdown file, in order.
func readmeBlocks(t *testing.T, file, md string) []readmeBlock {
	t.Helper()
	var out []readmeBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```sh" {
			continue
		}
		b := readmeBlock{file: file, line: i + 1}
		if i > 0 {
			if m := readmeMark.FindStringSubmatch(lines[i-1]); m != nil {
				b.serves, b.stops, b.notRun = m[3], strings.HasPrefix(m[2], "stops"), m[4]
			} else if strings.HasPrefix(lines[i-1], "<!--") {
				t.Fatalf("%s:%d: a mark the doc test does not know: %s", file, i, lines[i-1])
			}
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out
}

// The README and docs/ are executable: their shell blocks run as written,
// the README's first, then each document in the order docs/README.md lists
// them, in
// one shell, in a fresh copy of the repository, as a newcomer following it
// would run them (a block that serves runs in the background until the
// shell reaches a block that stops the servers, as a reader presses
// Ctrl-C; passwords come on standard input, one line per command that asks).
// A block the test does not run says why, in a comment above it.
func TestReadmeRunsAsWritten(t *testing.T) {
	if storetest.Postgres() {
		t.Skip("the README's commands run on their embedded default, SQLite: the SQLite pass of `make test` runs them")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary as the README does")
	}
	for _, port := range []string{"8080", "8081", "8090", "9400"} {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+port); err != nil {
			t.Fatalf("the README's commands use port %s, which is taken here: %v", port, err)
		} else {
			ln.Close()
		}
	}
	var blocks []readmeBlock
	for _, f := range documents(t) {
		md, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, readmeBlocks(t, f, string(md))...)
	}
	if len(blocks) < 5 {
		t.Fatalf("found %d shell blocks in the README and docs/", len(blocks))
	}
	dir := freshCopy(t)

	// One script, one shell: what a block exports or sets, the next sees.
	var script strings.Builder
	script.WriteString("set -e\nset -o pipefail\nservers=()\n")
	ran := 0
	for _, b := range blocks {
		if b.notRun != "" {
			t.Logf("%s:%d not run: %s", b.file, b.line, b.notRun)
			continue
		}
		ran++
		fmt.Fprintf(&script, "echo '== %s:%d'\n", b.file, b.line)
		if b.stops {
			script.WriteString(`for p in "${servers[@]}"; do kill -TERM -- -$p 2>/dev/null || kill -TERM $p 2>/dev/null || true; done` + "\n")
			script.WriteString("for p in \"${servers[@]}\"; do while kill -0 $p 2>/dev/null; do sleep 0.2; done; done\nservers=()\n")
		}
		if b.serves != "" {
			// The reader's terminal keeps it running; here it is a job of
			// its own, and the script goes on once it answers.
			fmt.Fprintf(&script, "set -m\n(\n%s) &\nservers+=($!)\nset +m\n", b.text)
			fmt.Fprintf(&script, "for i in $(seq 1200); do curl -sf %s >/dev/null && break; sleep 0.25; done\ncurl -sf %s >/dev/null\n", b.serves, b.serves)
			continue
		}
		script.WriteString(b.text)
	}
	script.WriteString("echo '== the README ran to its end'\n")
	t.Logf("ran %d of the %d shell blocks of the README and docs/", ran, len(blocks))
	if err := os.WriteFile(filepath.Join(dir, "readme.sh"), []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "readme.sh")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// The servers it started in the background keep its output open: once
	// the script ends, its output is what it wrote by then.
	cmd.WaitDelay = 3 * time.Second
	// A password for every command that asks for one.
	cmd.Stdin = strings.NewReader(strings.Repeat("correct horse battery staple\n", 10))
	cmd.Env = append(os.Environ(), "GOFLAGS=") // as a newcomer has it: the README gives the build tag itself
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	if errors.Is(runErr, exec.ErrWaitDelay) {
		runErr = nil
	}
	// Whatever the script left running (its servers, their children).
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	killListeners(t, dir)
	text := out.String()
	if runErr != nil || !strings.Contains(text, "== the README ran to its end") {
		t.Fatalf("the README's shell blocks stopped: %v\n%s", runErr, tail(text, 6000))
	}
	// What a newcomer would look for in what they typed.
	for _, want := range []string{`"status":"pending"`, `"verdict":"needs_approval"`, `"session":"conv-42"`, "created you@example.com", "Sign in with Test IdP"} {
		if !strings.Contains(text, want) {
			t.Errorf("the README's run never showed %q:\n%s", want, tail(text, 4000))
		}
	}
	if strings.Contains(text, `"status":"invalid"`) || strings.Contains(text, `"status":"denied"`) || strings.Contains(text, "policy:not-loaded") {
		t.Errorf("a README call was refused:\n%s", tail(text, 4000))
	}
}

// documents are the README and the documents docs/README.md lists, in
// its order; every Markdown file under docs/ is listed there.
func documents(t *testing.T) []string {
	t.Helper()
	index, err := os.ReadFile("../../docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\d+\. \[[^\]]+\]\(([^)]+\.md)\)`).FindAllStringSubmatch(string(index), -1) {
		out = append(out, "docs/"+m[1])
		listed["docs/"+m[1]] = true
	}
	err = filepath.WalkDir("../../docs", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") || path == "../../docs/README.md" {
			return err
		}
		if rel := strings.TrimPrefix(path, "../../"); !listed[rel] {
			t.Errorf("%s is not listed in docs/README.md", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// freshCopy is the repository's tracked files in a new folder, as a clone
// would have them.
func freshCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := exec.Command("git", "-C", "../..", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		src := filepath.Join("../..", f)
		data, err := os.ReadFile(src)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet committed
			}
			t.Fatal(err)
		}
		info, _ := os.Stat(src)
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// killListeners ends what still serves from the copy (a server started with
// `&` inside a block is in the script's process group, but `go run` starts
// its binary under another name).
func killListeners(t *testing.T, dir string) {
	t.Helper()
	out, _ := exec.Command("pgrep", "-f", dir).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	for _, port := range []string{"8080", "8081", "8090", "9400"} {
		for range 50 {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 100*time.Millisecond)
			if err != nil {
				break
			}
			c.Close()
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Every link of the README and docs/ to a file of the repository finds it.
func TestDocumentLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, f := range documents(t) {
		md, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(md), -1) {
			if strings.Contains(m[1], "://") || strings.HasPrefix(m[1], "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join("../..", filepath.Dir(f), m[1])); err != nil {
				t.Errorf("%s links to %s, which is not there", f, m[1])
			}
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage/storetest"
)

// notYetThrough are the conformance checks that pass against the reference
// everything-server directly but not through Countersign, per suite, as
// scenario/check: what the gateway does not pass on yet (issue 40). The
// test fails when one more fails through, and when one
// of these passes (then take it off the list).
var notYetThrough = map[string][]string{
	"active":     {},
	"2026-07-28": {},
}

// runTime ends the name of the folder the suite writes a scenario's
// checks in.
var runTime = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[0-9-]+Z?$`)

// The MCP project's conformance suite (@modelcontextprotocol/conformance on
// Node 22, pinned in .ci/conformance) against its reference
// everything-server, directly and through Countersign (the server as an
// mcp_servers entry with prefix: false, a policy allowing everything; the
// suite changes the server's lists by calling tools it does not list, so
// the entry forwards those: unlisted_tools),
// compared check by check: every check that passes direct passes through,
// but those on notYetThrough.
func TestConformanceThroughCountersign(t *testing.T) {
	dir, _ := filepath.Abs("../../.ci/conformance")
	bin := filepath.Join(dir, "node_modules/.bin")
	if _, err := os.Stat(filepath.Join(bin, "conformance")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf(".ci/conformance is not installed (%v): .ci/run installs it", err)
		}
		t.Skip("no .ci/conformance/node_modules: run make test, which installs it")
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	port := strings.TrimPrefix(freePort(t), "127.0.0.1:")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ev := exec.CommandContext(ctx, filepath.Join(bin, "tsx"), "everything-server.ts")
	ev.Dir, ev.Env = dir, append(env, "PORT="+port)
	// tsx runs the server in a node of its own: the group is stopped, or
	// that node outlives the test.
	ev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ev.Cancel = func() error { return syscall.Kill(-ev.Process.Pid, syscall.SIGKILL) }
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); _ = ev.Wait() }()
	direct := "http://localhost:" + port + "/mcp"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if r, err := http.Get(direct); err == nil {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the everything-server did not start")
		}
	}

	work := t.TempDir()
	if keep := os.Getenv("CONFORMANCE_KEEP"); keep != "" {
		work = keep // the suite's reports stay there, to read
	}
	toolsPath, policyPath := filepath.Join(work, "tools.yaml"), filepath.Join(work, "policy.yaml")
	os.WriteFile(toolsPath, []byte("mcp_servers:\n  - name: ev\n    url: "+direct+"\n    prefix: false\n    trust_annotations: true\n    unlisted_tools: high_write\n"), 0o600)
	os.WriteFile(policyPath, []byte("defaults:\n  read: {decision: allow, reason: allowed}\n  low_write: {decision: allow, reason: allowed}\n  high_write: {decision: allow, reason: allowed}\n"), 0o600)
	// countersign is a fresh Countersign in front of the server, its /mcp
	// URL. The suite sends no credentials: a proxy on localhost adds the
	// agent key, and passes the rest (Host and Origin included) as the
	// suite sent it.
	countersign := func() string {
		app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Tools: toolsPath, Policy: policyPath,
			AgentCallsPerSecond: 1000, AgentCallBurst: 1000}, io.Discard, io.Discard)
		key, _, err := app.accounts.AddAgent(context.Background(), "conformance", models.Actor{ID: "test"})
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := url.Parse("http://" + app.Addr())
		proxy := httputil.NewSingleHostReverseProxy(cs)
		proxy.FlushInterval = -1
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+key)
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		return "http://localhost:" + strings.TrimPrefix(front.URL, "http://127.0.0.1:") + "/mcp"
	}

	suite := func(url, out string, args ...string) map[string]bool {
		cmd := exec.Command(filepath.Join(bin, "conformance"), append([]string{"server", "--url", url, "-o", out}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		log, _ := cmd.CombinedOutput() // it exits 1 when a check fails
		checks := map[string]bool{}
		files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
		for _, f := range files {
			scenario := strings.TrimPrefix(filepath.Base(filepath.Dir(f)), "server-")
			scenario = runTime.ReplaceAllString(scenario, "")
			var cs []struct{ ID, Status string }
			b, _ := os.ReadFile(f)
			if err := json.Unmarshal(b, &cs); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, c := range cs {
				checks[scenario+"/"+c.ID] = checks[scenario+"/"+c.ID] || c.Status == "SUCCESS"
			}
		}
		if len(checks) < 20 {
			t.Fatalf("the suite ran %d checks against %s:\n%s", len(checks), url, log)
		}
		return checks
	}
	for _, run := range []struct {
		name string
		args []string
	}{{"active", nil}, {"2026-07-28", []string{"--requirements", "2026-07-28"}}} {
		name := run.name
		d := suite(direct, filepath.Join(work, name+"-direct"), run.args...)
		th := suite(countersign(), filepath.Join(work, name+"-through"), run.args...)
		known := func(check string) bool {
			return slices.Contains(notYetThrough[name], check)
		}
		var lost, fixed []string
		passedDirect, passedThrough := 0, 0
		for check, ok := range d {
			if !ok {
				continue
			}
			passedDirect++
			if th[check] {
				passedThrough++
				if known(check) {
					fixed = append(fixed, check)
				}
			} else if !known(check) {
				lost = append(lost, check)
			}
		}
		if len(lost) > 0 {
			// A few checks wait for a notification within a window (1.5 s
			// for a changed list, which goes through the core's reload
			// here); on a loaded machine one can miss it. Those lost get
			// the whole suite once more: what fails again is lost.
			again := suite(countersign(), filepath.Join(work, name+"-through-again"), run.args...)
			lost = slices.DeleteFunc(lost, func(check string) bool {
				if again[check] {
					t.Logf("%s: %s passed through on the second run of the suite", name, check)
					passedThrough++
				}
				return again[check]
			})
		}
		slices.Sort(lost)
		slices.Sort(fixed)
		t.Logf("%s: %d checks pass direct, %d of them through", name, passedDirect, passedThrough)
		if len(lost) > 0 {
			t.Errorf("%s: %d checks pass direct but not through Countersign:\n  %s", name, len(lost), strings.Join(lost, "\n  "))
		}
		if len(fixed) > 0 {
			t.Errorf("%s: these pass through now; take them off notYetThrough:\n  %s", name, strings.Join(fixed, "\n  "))
		}
	}
}

package web_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
)

// nodePackage is a pinned package of .ci/mcp (installed by .ci/run and make
// test); without node or the package the test is skipped, but not in CI.
func nodePackage(t *testing.T, file string) (node, script string) {
	t.Helper()
	script, _ = filepath.Abs(filepath.Join("../.ci/mcp/node_modules", file))
	node, nodeErr := exec.LookPath("node")
	_, err := os.Stat(script)
	if nodeErr != nil || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or .ci/mcp's %s is missing (%v, %v): .ci/run installs them", file, nodeErr, err)
		}
		t.Skip("no node or no .ci/mcp/node_modules: run make test, which installs them")
	}
	return node, script
}

// mcp-remote from the npm registry, given only Countersign's /mcp URL,
// finds the authorization server from the 401, registers, and sends a
// person to authorize it; Chromium signs in as an admin and consents; then
// tools/list and a gated tools/call go through mcp-remote with the token it
// got, as the outside agent the admin chose.
func TestMCPRemoteSignsInWithOAuth(t *testing.T) {
	node, remote := nodePackage(t, "mcp-remote/dist/proxy.js")
	set, refunds := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	a.staff(models.Admin, "ada@x.test", "Ada")
	browser := person(t, newBrowser(t))

	// mcp-remote opens a browser when it can: it finds none here (its PATH
	// holds node alone), prints the address instead, and the test's
	// Chromium goes there.
	bin := t.TempDir()
	if err := os.Symlink(node, filepath.Join(bin, "node")); err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(filepath.Join(bin, "node"), remote, a.srv.URL+"/mcp", strconv.Itoa(port), "--host", "127.0.0.1")
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir(), "MCP_REMOTE_CONFIG_DIR=" + t.TempDir()}
	stderr, w := io.Pipe()
	cmd.Stderr = w
	authorize := make(chan string, 1)
	var said strings.Builder
	go func() {
		lines := bufio.NewScanner(stderr)
		next := false
		for lines.Scan() {
			line := strings.TrimSpace(lines.Text())
			said.WriteString(line + "\n")
			if next && strings.HasPrefix(line, "http") {
				authorize <- line
				next = false
			}
			next = next || strings.Contains(line, "Please authorize this client by visiting")
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	connected := make(chan error, 1)
	var cs *mcp.ClientSession
	go func() {
		var err error
		cs, err = mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		connected <- err
	}()
	t.Cleanup(func() { w.Close() })

	var url string
	select {
	case url = <-authorize:
	case err := <-connected:
		t.Fatalf("mcp-remote connected without asking anyone (%v); it said:\n%s", err, said.String())
	case <-ctx.Done():
		t.Fatalf("mcp-remote never asked for a person; it said:\n%s", said.String())
	}
	if !strings.HasPrefix(url, a.srv.URL+"/oauth/authorize?") || !strings.Contains(url, "code_challenge_method=S256") {
		t.Fatalf("mcp-remote was sent to %s", url)
	}
	signInBrowser(t, browser, a.srv.URL, "ada@x.test")
	err := chromedp.Do(browser,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=oauth-consent]`)))
	shown, _ := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`[data-testid=client-name]`)))
	if err == nil {
		err = chromedp.Do(browser,
			chromedp.SetValue(chromedp.CSS(`input[name=name]`), "remote-desk"),
			chromedp.Click(chromedp.CSS(`button[value=authorize]`)),
			chromedp.WaitReady(chromedp.CSS(`body`)),
		)
	}
	if err != nil {
		screenshot(t, browser, "oauth-consent")
		t.Fatalf("consent in Chromium: %v; mcp-remote said:\n%s", err, said.String())
	}
	if shown == "" {
		t.Fatal("the consent page named no client")
	}
	select {
	case err := <-connected:
		if err != nil {
			t.Fatalf("mcp-remote did not connect after the consent: %v; it said:\n%s", err, said.String())
		}
	case <-ctx.Done():
		t.Fatalf("mcp-remote did not connect after the consent; it said:\n%s", said.String())
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 2 {
		t.Fatalf("tools/list through mcp-remote: %v %+v", err, list)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A7", "amount": 900}})
	if err != nil || !strings.Contains(textOf(r), "Waiting for a person") || refunds.Load() != 0 {
		t.Fatalf("a gated call through mcp-remote: %v %s", err, textOf(r))
	}
	pending, _ := a.store.PendingActions(context.Background(), models.ActionFilter{})
	call, _ := a.store.ToolCall(context.Background(), pending[0].ID)
	run, _ := a.store.Run(context.Background(), call.RunID)
	agent, _ := a.store.AgentByName(context.Background(), "remote-desk")
	if agent == nil || run.AgentID != agent.ID {
		t.Fatalf("the call is agent %q's, not the one the admin authorized", run.AgentID)
	}
}

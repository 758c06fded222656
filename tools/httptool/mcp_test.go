package httptool_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// An MCP server that is not there when the file is loaded does not stop the
// rest: the file's own tools load, the server is shown as not answering,
// and its tools come (and the watcher is told) once it answers.
func TestMCPServerDownAtLoadComesLater(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there yet
	set, err := httptool.Load([]byte(`tools:
  - name: note
    risk: read
mcp_servers:
  - name: crm
    url: "http://`+addr+`/"
    headers: {Authorization: "Bearer ${CRM_TOKEN}"}
`), "tools.yaml", httptool.Options{Env: env(map[string]string{"CRM_TOKEN": "crm-token-0123"}), Reconnect: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("a server that is down refused the file: %v", err)
	}
	defer set.Close()
	changed := make(chan struct{}, 4)
	set.Watch(func() { changed <- struct{}{} })
	st := set.Upstreams()
	if len(set.Tools()) != 1 || len(st) != 1 || st[0].Connected || st[0].Error == "" || strings.Contains(st[0].Error, "crm-token-0123") {
		t.Fatalf("down at load: %d tools, %+v", len(set.Tools()), st)
	}

	up := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "Find-Contact", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Email string `json:"email"`
		}) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"name": "Ines"}, nil
		})
	mcp.AddTool(up, &mcp.Tool{Name: "find_contact", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, // the same name once made safe
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, map[string]any, error) {
			return nil, nil, nil
		})
	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)}
	go srv.Serve(ln)
	defer srv.Close()
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatalf("the server's tools did not come: %+v", set.Upstreams())
	}
	reg, err := tools.NewRegistry(set.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	find, ok := reg.Get("crm__find_contact")
	st = set.Upstreams()
	if !ok || find.Upstream != "crm" || !st[0].Connected || st[0].Tools != 1 || len(st[0].Skipped) != 1 ||
		!strings.Contains(st[0].Skipped[0], "name of another tool") {
		t.Fatalf("after it came: %d tools, %+v", len(reg.All()), st)
	}
	out, err := run(t, set, "crm__find_contact", `{"email":"i@x.test"}`)
	if raw, _ := json.Marshal(out); err != nil || !strings.Contains(string(raw), "Ines") {
		t.Fatalf("call: %s %v", raw, err)
	}
}

// An upstream that echoes a ${NAME} value in its structured content and its
// text gets it hidden in both, escaped or not.
func TestMCPResultsNeverShowAFileSecret(t *testing.T) {
	up := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "whoami", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
			tok := req.Extra.Header.Get("Authorization")
			return nil, map[string]any{"seen": tok, "nested": []any{map[string]any{"again": strings.TrimPrefix(tok, "Bearer ")}}}, nil
		})
	srv := httptestServer(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	set := loadFile(t, "mcp_servers:\n  - name: crm\n    url: "+srv+"\n    headers: {Authorization: \"Bearer ${CRM_TOKEN}\"}\n",
		map[string]string{"CRM_TOKEN": "crm&token<0123>"})
	out, err := run(t, set, "crm__whoami", `{}`)
	raw, _ := json.Marshal(out)
	if err != nil || strings.Contains(string(raw), "0123") || !strings.Contains(string(raw), `"seen":"Bearer [secret]"`) ||
		!strings.Contains(string(raw), `"again":"[secret]"`) {
		t.Fatalf("result %s %v", raw, err)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

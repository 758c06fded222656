package httptool_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// mcpServerOffering is an MCP server over HTTP offering read tools of
// these names, each answering its own name.
func mcpServerOffering(t *testing.T, names ...string) (*mcp.Server, string) {
	t.Helper()
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	for _, n := range names {
		addNamed(up, n)
	}
	return up, httptestServer(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
}

func addNamed(up *mcp.Server, name string) {
	mcp.AddTool(up, &mcp.Tool{Name: name, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"answered_by": name}, nil
		})
}

func names(ts []*tools.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

// prefix: false offers a server's tools under the names the server gives
// them, any name MCP allows, and a call by that name reaches that tool.
func TestUnprefixedServerKeepsItsToolNames(t *testing.T) {
	_, crm := mcpServerOffering(t, "Find-Contact", "notes.add", "test_simple_text")
	_, fs := mcpServerOffering(t, "read_file")
	set := loadFile(t, "mcp_servers:\n  - name: crm\n    url: "+crm+"\n    prefix: false\n  - name: fs\n    url: "+fs+"\n", nil)
	if got := names(set.Tools()); !slices.Equal(got, []string{"Find-Contact", "fs__read_file", "notes.add", "test_simple_text"}) {
		t.Fatalf("offered as %v", got)
	}
	if _, err := tools.NewRegistry(set.Tools()...); err != nil {
		t.Fatalf("the registry refused the names: %v", err)
	}
	for _, n := range []string{"Find-Contact", "notes.add"} {
		out, err := run(t, set, n, `{}`)
		if raw, _ := json.Marshal(out); err != nil || !strings.Contains(string(raw), `"answered_by":"`+n+`"`) {
			t.Fatalf("%s: %s %v", n, raw, err)
		}
	}
}

// Two servers that would offer one name, or a server and a tool of the
// file, make the file refused at load, both named.
func TestTheSameNameFromTwoServersIsRefusedAtLoad(t *testing.T) {
	_, a := mcpServerOffering(t, "search")
	_, b := mcpServerOffering(t, "search", "other")
	for _, tc := range []struct{ file, want string }{
		{"mcp_servers:\n  - name: a\n    url: " + a + "\n    prefix: false\n  - name: b\n    url: " + b + "\n    prefix: false\n",
			"line 5: the MCP servers a and b both offer a tool named search"},
		// a prefixed name meeting another server's own
		{"mcp_servers:\n  - name: a\n    url: " + a + "\n  - name: b\n    url: " + b + "\n    prefix: false\n", ""},
		{"tools:\n  - name: search\n    risk: read\nmcp_servers:\n  - name: a\n    url: " + a + "\n    prefix: false\n",
			"the MCP tool search has the name of another tool"},
	} {
		set, err := httptool.Load([]byte(tc.file), "tools.yaml", httptool.Options{Env: env(nil)})
		if tc.want == "" {
			if err != nil {
				t.Errorf("a__search beside search was refused: %v", err)
			} else {
				set.Close()
			}
			continue
		}
		if err == nil {
			set.Close()
			t.Errorf("loaded:\n%s", tc.file)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("refused with %q, want %q", err, tc.want)
		}
	}
}

// A server whose new list takes up a name another server offers does not
// get it: the tool is left out of the later server, and its status says
// why.
func TestANameTakenLaterIsLeftOutAndSaid(t *testing.T) {
	_, a := mcpServerOffering(t, "search")
	bServer, b := mcpServerOffering(t, "other")
	set := loadFile(t, "mcp_servers:\n  - name: a\n    url: "+a+"\n    prefix: false\n  - name: b\n    url: "+b+"\n    prefix: false\n", nil)
	changed := make(chan struct{}, 4)
	set.Watch(func() { changed <- struct{}{} })
	addNamed(bServer, "search")
	addNamed(bServer, "fresh")
	deadline := time.After(20 * time.Second)
	for !slices.Contains(names(set.Tools()), "fresh") {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("b's new list never came: %v", names(set.Tools()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := names(set.Tools()); !slices.Equal(got, []string{"fresh", "other", "search"}) {
		t.Fatalf("tools %v", got)
	}
	out, err := run(t, set, "search", `{}`)
	if raw, _ := json.Marshal(out); err != nil || !strings.Contains(string(raw), `"answered_by":"search"`) {
		t.Fatalf("search: %s %v", raw, err)
	}
	st := set.Upstreams()
	if len(st) != 2 || len(st[1].Skipped) != 1 || !strings.Contains(st[1].Skipped[0], "search: search is the name of another tool") {
		t.Fatalf("b's status: %+v", st)
	}
}

// promptServer is an MCP server over HTTP written by hand that offers the
// tool tool and one prompt, prompt: to both revisions, or (modernOnly) to
// 2026-07-28 clients only.
func promptServer(t *testing.T, tool, prompt string, modernOnly bool) string {
	t.Helper()
	return httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&m) != nil || len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		modern := r.Header.Get("Mcp-Protocol-Version") == "2026-07-28"
		prompts := `[{"name":"` + prompt + `"}]`
		if modernOnly && !modern {
			prompts = `[]`
		}
		result := map[string]string{
			"initialize":      `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"prompts":{}},"serverInfo":{"name":"p","version":"1"}}`,
			"server/discover": `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{}},"resultType":"complete"}`,
			"tools/list":      `{"tools":[{"name":"` + tool + `","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`,
			"prompts/list":    `{"prompts":` + prompts + `}`,
		}[m.Method]
		msg := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
		if result == "" {
			msg = `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"no"}}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(msg))
	}))
}

// Two servers that would offer one prompt name under prefix: false make
// the file refused at load, whether they list it at every revision or one
// of them lists it to 2026-07-28 clients only.
func TestTheSamePromptFromTwoServersIsRefusedAtLoad(t *testing.T) {
	for _, modernOnly := range []bool{false, true} {
		a, b := promptServer(t, "one", "greet", false), promptServer(t, "two", "greet", modernOnly)
		file := "mcp_servers:\n  - name: a\n    url: " + a + "\n    prefix: false\n  - name: b\n    url: " + b + "\n    prefix: false\n"
		set, err := httptool.Load([]byte(file), "tools.yaml", httptool.Options{Env: env(nil)})
		if err == nil {
			set.Close()
			t.Errorf("modern only %v: loaded", modernOnly)
		} else if !strings.Contains(err.Error(), "the MCP servers a and b both offer a prompt named greet") {
			t.Errorf("modern only %v: %v", modernOnly, err)
		}
		// Each under its own server's name: loaded.
		set, err = httptool.Load([]byte(strings.ReplaceAll(file, "    prefix: false\n", "")), "tools.yaml", httptool.Options{Env: env(nil)})
		if err != nil {
			t.Errorf("modern only %v, prefixed: %v", modernOnly, err)
		} else {
			set.Close()
		}
	}
}

// unlisted_tools: a name that begins with a server's prefix is that
// server's alone; two servers with prefix: false that both forward
// calls to tools they do not list, or a risk that is not one, make the
// file refused at load.
func TestUnlistedToolsAreOneServersAndRefusedWhenUnclear(t *testing.T) {
	_, a := mcpServerOffering(t, "search")
	_, b := mcpServerOffering(t, "find")
	set := loadFile(t, "mcp_servers:\n  - name: a\n    url: "+a+"\n    prefix: false\n    unlisted_tools: read\n  - name: b\n    url: "+b+"\n", nil)
	for name, want := range map[string]string{"poke": "a", "b__poke": "", "search": "", "Search": "", "b__find": "", "bad name": ""} {
		tool, ok := set.Unlisted(name)
		if got := ""; ok {
			got = tool.Upstream
			if tool.Risk != tools.RiskRead || !tool.Unlisted || tool.UpstreamName != name {
				t.Errorf("%s: %+v", name, tool)
			}
			if got != want {
				t.Errorf("%s: unlisted at %q, want %q", name, got, want)
			}
		} else if want != "" {
			t.Errorf("%s: not found, want %s's", name, want)
		}
	}
	for _, tc := range []struct{ file, want string }{
		{"mcp_servers:\n  - name: a\n    url: " + a + "\n    prefix: false\n    unlisted_tools: read\n  - name: b\n    url: " + b + "\n    prefix: false\n    unlisted_tools: high_write\n",
			"line 9: the MCP servers a and b both have prefix: false and unlisted_tools"},
		{"mcp_servers:\n  - name: a\n    url: " + a + "\n    unlisted_tools: yes\n", `line 4: risk "yes" is not read, low_write or high_write`},
	} {
		set, err := httptool.Load([]byte(tc.file), "tools.yaml", httptool.Options{Env: env(nil)})
		if err == nil {
			set.Close()
			t.Errorf("loaded:\n%s", tc.file)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("refused with %q, want %q", err, tc.want)
		}
	}
}

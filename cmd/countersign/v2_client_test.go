package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// The TypeScript SDK v2's stock client probing for 2026-07-28
// (versionNegotiation auto, .ci/mcp/ts-agent-v2.mjs),
// over HTTP and through the stdio bridge, in front of the reference
// server-everything, which speaks 2025 only: it calls a tool, gets a
// prompt, reads a resource and asks for a completion, and gets what the
// server answered (the SDK refuses any result without the revision's
// resultType, and a tool list without its cache words).
func TestTheTypeScriptV2ClientUsesA2025Server(t *testing.T) {
	nodeScript(t, "ts-agent-v2.mjs")
	everything, _ := filepath.Abs("../../.ci/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	toolsFile := filepath.Join(t.TempDir(), "tools.yaml")
	os.WriteFile(toolsFile, []byte("mcp_servers:\n  - name: ev\n    command: node\n    args: [\""+everything+"\", stdio]\n    prefix: false\n    trust_annotations: true\n"), 0o600)
	db := storetest.DSN(t)
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Tools: toolsFile, MCPHold: 2 * time.Second}, io.Discard)
	base := "http://" + app.Addr()
	key, _ := agentAndApprover(t, db, "v2")
	self, env := asCLI(t)
	for _, via := range []string{"http", "stdio"} {
		at := func(spec map[string]any) map[string]any {
			if via == "http" {
				spec["http"], spec["key"] = base+"/mcp", key
			} else {
				spec["stdio"], spec["args"], spec["env"] = self, []string{"mcp", "--url", base, "--agent-key", key}, env
			}
			spec["negotiate"] = "auto"
			return spec
		}
		for _, c := range []struct {
			what string
			spec map[string]any
			want string
		}{
			{"a tool", map[string]any{"call": map[string]any{"name": "echo", "arguments": map[string]any{"message": "hi v2"}}}, "hi v2"},
			{"a prompt", map[string]any{"prompt": map[string]any{"name": "simple-prompt"}}, "simple prompt"},
			{"a resource", map[string]any{"read": "demo://resource/dynamic/text/1"}, "Resource 1: This is a plaintext resource"},
			{"a completion", map[string]any{"complete": map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "completable-prompt"},
				"argument": map[string]any{"name": "department", "value": "Eng"}}}, `"values":["Engineering"]`},
		} {
			if got := tsAgentOf(t, "ts-agent-v2.mjs", at(c.spec)); got.Error != "" || !strings.Contains(asJSON(got.Result), c.want) {
				t.Errorf("over %s, %s: %+v, want %q in the result", via, c.what, got, c.want)
			}
		}
	}
}

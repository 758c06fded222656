package upstream

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/tools"
)

// A server cannot lower a tool's risk by listing it otherwise at
// 2026-07-28: a tool listed at both revisions is one tool, with the higher
// of the two risks; one listed at a single revision is offered to that
// revision's clients only.
func TestAToolListedAtBothRevisionsKeepsTheHigherRisk(t *testing.T) {
	no := false
	u := &Server{spec: Spec{Name: "two", Prefix: &no}, cfg: Config{
		Redact: func(s string) string { return s }, RedactJSON: func(b []byte) []byte { return b }}}
	tool := func(name string, readOnly bool, wire string) *tools.Tool {
		t.Helper()
		tl, err := u.proxy(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly}}, []byte(wire))
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	// The server says read-only to 2025 clients, not to 2026 ones.
	const modernWipe = `{"name":"wipe","inputSchema":{"type":"object"}}`
	u.modern = &mcp.ClientSession{}
	u.modernTools = []*tools.Tool{tool("wipe", false, modernWipe), tool("only_new", true, `{"name":"only_new","inputSchema":{}}`)}
	got := map[string]*tools.Tool{}
	for _, tl := range u.merged([]*tools.Tool{tool("wipe", true, `{"name":"wipe","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`),
		tool("only_old", true, `{"name":"only_old","inputSchema":{}}`)}) {
		got[tl.Name] = tl
	}
	if w := got["wipe"]; w == nil || w.Risk != tools.RiskHighWrite || w.Revision != "" || string(w.ModernWire) != modernWipe {
		t.Errorf("the tool listed at both: %+v", w)
	}
	if got["only_old"] == nil || got["only_old"].Revision != tools.LegacyOnly || got["only_new"] == nil || got["only_new"].Revision != ModernProtocol {
		t.Errorf("the tools listed at one revision: %+v", got)
	}
	if w := tool("wipe", true, `{"name":"wipe","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`).WithRisk(tools.RiskHighWrite, ""); got["wipe"].DefinitionHash() == w.DefinitionHash() {
		t.Error("a pin of the tool does not cover its 2026-07-28 bytes")
	}
}

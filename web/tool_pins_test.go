package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// upstreamTool is a tool as an MCP server named crm lists it.
func upstreamTool(t *testing.T, name string, risk tools.Risk, listing map[string]any) *tools.Tool {
	t.Helper()
	tool, err := tools.FromSpec(tools.Spec{Name: "crm__" + name, Description: listing["description"].(string), Risk: risk,
		Schema: json.RawMessage(`{"type":"object","properties":{"email":{"type":"string"}}}`),
		Run:    func(context.Context, tools.Call, map[string]any) (any, error) { return map[string]any{"ok": true}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	tool.Upstream = "crm"
	tool.Listing, _ = json.Marshal(listing)
	return tool
}

// An MCP server's tool whose definition changed since it was accepted, and
// one that is new, wait on /tools for an admin, with what changed; until
// then they are held at high_write. Only an admin accepts, only the
// definition they saw, and the acceptance is audited.
func TestToolsPageAcceptsChangedDefinitions(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	old, _ := json.Marshal(map[string]any{"name": "find", "description": "Find a contact", "annotations": map[string]any{"readOnlyHint": true}})
	if err := store.PinTools(ctx, []models.ToolPin{{Name: "crm__find", Upstream: "crm", Hash: "an-older-definition", Definition: string(old)}},
		"tools file", "the server's first listing", false); err != nil {
		t.Fatal(err)
	}
	find := upstreamTool(t, "find", tools.RiskRead, map[string]any{"name": "find", "description": "Find a contact <b>now</b>",
		"annotations": map[string]any{"readOnlyHint": true}})
	added := upstreamTool(t, "tag", tools.RiskLowWrite, map[string]any{"name": "tag", "description": "Tag a contact",
		"annotations": map[string]any{"destructiveHint": false}})
	reg, _ := tools.NewRegistry(find, added)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", reg)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, appConfig{Store: store, Tools: reg, Policy: pol, Log: discardLog()}, false)
	a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Admin, "ada@x.test", "Ada")
	for _, name := range []string{"crm__find", "crm__tag"} {
		if tool, _ := a.gate.Tools().Get(name); tool.Risk != tools.RiskHighWrite {
			t.Fatalf("%s unaccepted is %s, not held at high_write", name, tool.Risk)
		}
	}

	ann := a.signIn("ann@x.test")
	_, page := ann.get("/tools")
	if strings.Count(page, `data-testid="unaccepted"`) != 2 || !strings.Contains(page, `data-testid="tool-held"`) ||
		!strings.Contains(page, "-  &#34;description&#34;: &#34;Find a contact&#34;") ||
		!strings.Contains(page, `+  &#34;description&#34;: &#34;Find a contact \u003cb\u003enow\u003c/b\u003e&#34;`) || !strings.Contains(page, "Find a contact &lt;b&gt;now&lt;/b&gt;") {
		t.Fatalf("the tools page does not show what changed, escaped:\n%s", page)
	}
	if strings.Contains(page, `data-testid="accept"`) {
		t.Fatal("an approver is offered to accept a definition")
	}
	hash := find.ListingHash()
	if res, _ := ann.post("/tools/crm__find/accept", url.Values{"csrf": {ann.csrf}, "hash": {hash}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("an approver accepted: %d", res.StatusCode)
	}

	ada := a.signIn("ada@x.test")
	if res, _ := ada.post("/tools/crm__find/accept", url.Values{"hash": {hash}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("accepted without the CSRF token: %d", res.StatusCode)
	}
	res, body := ada.post("/tools/crm__find/accept", url.Values{"csrf": {ada.csrf}, "hash": {"not-what-is-offered"}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "changed again since you looked") {
		t.Fatalf("a definition other than the one offered was accepted: %d\n%s", res.StatusCode, body)
	}
	res, _ = ada.post("/tools/crm__find/accept", url.Values{"csrf": {ada.csrf}, "hash": {hash}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("accept: %d", res.StatusCode)
	}
	_, page = ada.get(res.Header.Get("Location"))
	if !strings.Contains(page, "Accepted the definition of crm__find") || strings.Count(page, `data-testid="unaccepted"`) != 1 {
		t.Fatalf("after accepting:\n%s", page)
	}
	if tool, _ := a.gate.Tools().Get("crm__find"); tool.Risk != tools.RiskRead {
		t.Fatalf("accepted, crm__find is %s, not its own read", tool.Risk)
	}
	if tool, _ := a.gate.Tools().Get("crm__tag"); tool.Risk != tools.RiskHighWrite {
		t.Fatalf("the one not accepted is %s", tool.Risk)
	}
	events, _ := a.store.AuditEventsFor(ctx, "crm__find")
	last := events[len(events)-1]
	if last.Kind != models.EventToolAccepted || !strings.Contains(last.Actor, "Ada") || !strings.Contains(last.Payload, hash) {
		t.Fatalf("the acceptance is not audited: %+v", last)
	}
}

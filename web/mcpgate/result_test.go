package mcpgate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text + "\n")
		}
	}
	return b.String()
}

// What a client gets is what the upstream sent, plus Countersign's words
// only where a person or the policy acted.
func TestResultPassesTheUpstreamsAnswerOn(t *testing.T) {
	t.Parallel()
	upstream := &tools.Tool{Name: "fs__write_file", Upstream: "fs"}
	sent := `{"content":[{"type":"text","text":"wrote 12 bytes"},{"type":"image","data":"aGk=","mimeType":"image/png"}],` +
		`"structuredContent":{"bytes":12},"_meta":{"trace":"t1"}}`
	r := result(&models.ToolCall{ID: "call_1", Status: models.CallSucceeded, Result: sent}, upstream, "", nil)
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal(got, &a)
	json.Unmarshal([]byte(sent), &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the upstream's answer changed:\n sent %s\n got  %s", sent, got)
	}

	edited := result(&models.ToolCall{ID: "call_1", Status: models.CallSucceeded, Result: sent}, upstream, "An approver changed path.", nil)
	if len(edited.Content) != 3 || !strings.HasPrefix(textOf(edited), "An approver changed path.\nwrote 12 bytes") {
		t.Fatalf("the approver's note: %s", textOf(edited))
	}
	if _, ok := edited.Content[2].(*mcp.ImageContent); !ok {
		t.Fatalf("the image went missing: %#v", edited.Content)
	}
}

// Countersign's own tools answer with their JSON as text and as structured
// content; every other outcome says who acted, in words.
func TestResultSaysWhoActed(t *testing.T) {
	t.Parallel()
	own := &tools.Tool{Name: "issue_refund"}
	r := result(&models.ToolCall{Status: models.CallSucceeded, Result: `{"refund_id":"rf_1"}`}, own, "", nil)
	if r.IsError || textOf(r) != "{\"refund_id\":\"rf_1\"}\n" || r.StructuredContent.(map[string]any)["refund_id"] != "rf_1" {
		t.Fatalf("own tool: %+v", r)
	}
	withSchema := &tools.Tool{Name: "x", Upstream: "u", Listing: json.RawMessage(`{"name":"x","outputSchema":{"type":"object"}}`)}
	for _, c := range []struct {
		call  models.ToolCall
		tool  *tools.Tool
		want  string
		isErr bool
	}{
		{models.ToolCall{ID: "call_2", Status: models.CallPending}, own, "Waiting for a person to decide (call call_2, pending)", false},
		{models.ToolCall{ID: "call_2", Status: models.CallPending}, withSchema, "Waiting for a person", true},
		{models.ToolCall{Status: models.CallDenied, Rule: "no-big-refunds", Reason: "over $1,000"}, own, "Denied by policy: over $1,000", true},
		{models.ToolCall{Status: models.CallDenied, Rule: "limit:pending_per_run", Reason: "5 actions wait already"}, own, "Not run: 5 actions wait already", true},
		{models.ToolCall{Status: models.CallRejected, Error: "not eligible"}, own, "Rejected by a person: not eligible", true},
		{models.ToolCall{Status: models.CallExpired}, own, "Expired: nobody decided in time", true},
		{models.ToolCall{Status: models.CallUnknown, Error: "the backend did not answer"}, own, "Outcome unknown: the backend did not answer", true},
		{models.ToolCall{Status: models.CallFailed, Error: "order A1 was not found"}, own, "order A1 was not found", true},
	} {
		r := result(&c.call, c.tool, "", nil)
		if !strings.HasPrefix(textOf(r), c.want) || r.IsError != c.isErr {
			t.Errorf("%s: %q (error %v), want %q (error %v)", c.call.Status, textOf(r), r.IsError, c.want, c.isErr)
		}
	}
}

// A change a person made is told in _meta, and in the structured content
// beside the upstream's keys when the output schema allows other keys; a
// closed output schema keeps the structured content as the upstream sent
// it (clients validate it).
func TestAChangeIsToldWhereTheClientReads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listing string
		inside  bool
	}{
		{`{"name":"w"}`, true},
		{`{"name":"w","outputSchema":{"type":"object"}}`, true},
		{`{"name":"w","outputSchema":{"type":"object","additionalProperties":false}}`, false},
		{`{"name":"w","outputSchema":{"type":"object","unevaluatedProperties":false}}`, false},
	} {
		tool := &tools.Tool{Name: "w", Upstream: "up"}
		tool.SetListing(json.RawMessage(tc.listing))
		sent := `{"content":[{"type":"text","text":"ok"}],"structuredContent":{"bytes":12}}`
		call := &models.ToolCall{ID: "c", Status: models.CallSucceeded, Result: sent, OriginalArgs: `{"n":1}`, Args: `{"n":2}`}
		add := changeSaid(tool, call, "A person changed it.")
		r := withSaid(result(call, tool, "A person changed it.", nil), add)
		sc := r.StructuredContent.(map[string]any)
		_, in := sc[MetaChanged]
		if in != tc.inside || sc["bytes"] != 12.0 || r.GetMeta()[MetaChanged] == nil || !strings.HasPrefix(textOf(r), "A person changed it.") {
			t.Errorf("%s: structured %v, meta %v, text %q", tc.listing, sc, r.GetMeta(), textOf(r))
		}
		// In the upstream's own bytes, the same words in the same places.
		b, err := splice([]byte(sent), add)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"content":[{"type":"text","text":"A person changed it."},{"type":"text","text":"ok"}],"structuredContent":{"bytes":12`
		if tc.inside {
			want += `,"countersign/changed":{"asked":{"n":1},"note":"A person changed it.","ran":{"n":2}}`
		}
		want += `},"_meta":{"countersign/changed":{"asked":{"n":1},"note":"A person changed it.","ran":{"n":2}}}}`
		if string(b) != want {
			t.Errorf("%s: spliced\n%s\nwant\n%s", tc.listing, b, want)
		}
	}
}

// Countersign's words go into an upstream's result without touching a
// byte of it; what is not a tool result is left to the SDK.
func TestSpliceKeepsTheUpstreamsBytes(t *testing.T) {
	t.Parallel()
	receipt := additions{meta: []member{{MetaReceipt, "r<1>"}}}
	note := additions{first: textBlock{Type: "text", Text: "changed"}, structured: []member{{"k", 1}}, meta: receipt.meta}
	for _, c := range []struct {
		in   string
		add  additions
		want string
	}{
		{`{"content":[]}`, receipt, `{"content":[],"_meta":{"countersign/receipt":"r<1>"}}`},
		{` { "content" : [ ] , "_meta" : { } } `, receipt, ` { "content" : [ ] , "_meta" : { "countersign/receipt":"r<1>"} } `},
		{`{"_meta":{"a":"\u003c"},"content":[{"type":"text","text":"x"}]}`, receipt, `{"_meta":{"a":"\u003c","countersign/receipt":"r<1>"},"content":[{"type":"text","text":"x"}]}`},
		{`{"content":[],"structuredContent":{}}`, note, `{"content":[{"type":"text","text":"changed"}],"structuredContent":{"k":1},"_meta":{"countersign/receipt":"r<1>"}}`},
		{`{"content":[1],"structuredContent":[2]}`, note, `{"content":[{"type":"text","text":"changed"},1],"structuredContent":[2],"_meta":{"countersign/receipt":"r<1>"}}`},
		{`{"content":[]}`, additions{top: []member{{"resultType", "complete"}, {"content", 1}}}, `{"content":[],"resultType":"complete"}`},
	} {
		got, err := splice([]byte(c.in), c.add)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s (%v), want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{}`, `{"content":{}}`, `{"content":[],"_meta":null}`, `{"content":[]} {}`, `{"content":[]`, `{"content":[],}`,
		`{"a":,"content":[]}`, `{"content":[] "a":1}`, `{"content" []}`, `{"content":[]}}`, `{"content":[}`, `{"content":[]]`,
		`{1:2,"content":[]}`, `{"content":[],"a":tru}`, `{"content":["\x"]}`, `{"content":[]}x`, `{,"content":[]}`} {
		if got, err := splice([]byte(bad), receipt); err == nil {
			t.Errorf("%s was spliced: %s", bad, got)
		}
	}
}

// A call that waits for a person is told so in words, as a result that is
// not an error, so that clients which raise tool errors (LangChain's MCP
// adapters, Mastra) hand the words to their model; only a tool whose
// server lists an output schema gets them as a tool error, since clients
// refuse a result without the structured content such a tool promises.
func TestAWaitingCallIsAResultNotAnError(t *testing.T) {
	t.Parallel()
	waiting := &models.ToolCall{ID: "call_9", Status: models.CallPending}
	plain := &tools.Tool{Name: "crm__delete_contact", Upstream: "crm"}
	if r := result(waiting, plain, "", nil); r.IsError || !strings.HasPrefix(textOf(r), "Waiting for a person to decide (call call_9") {
		t.Fatalf("waiting, no output schema: isError %v, %q", r.IsError, textOf(r))
	}
	schema := &tools.Tool{Name: "fs__write_file", Upstream: "fs"}
	schema.SetListing(json.RawMessage(`{"name":"write_file","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"bytes":{"type":"number"}}}}`))
	if r := result(waiting, schema, "", nil); !r.IsError || !strings.HasPrefix(textOf(r), "Waiting for a person to decide (call call_9") {
		t.Fatalf("waiting, with an output schema: isError %v, %q", r.IsError, textOf(r))
	}
}

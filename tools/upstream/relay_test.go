package upstream

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway reuses a decoded result only when it is what was recorded,
// and only once: a result recorded otherwise (secrets hidden in it) is
// decoded from the record.
func TestRelayHandsOnTheDecodedResultOnlyWhenItWasRecordedSo(t *testing.T) {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}
	r := &Relay{}
	r.ran(res, []byte(`{"content":[{"type":"text","text":"hi"}]}`))
	if got := r.Result(`{"content":[{"type":"text","text":"[hidden]"}]}`); got != nil {
		t.Fatal("handed on a result that is not the one recorded")
	}
	if got := r.Result(`{"content":[{"type":"text","text":"hi"}]}`); got != res {
		t.Fatal("the result recorded as decoded was not handed on")
	}
	if got := r.Result(`{"content":[{"type":"text","text":"hi"}]}`); got != nil {
		t.Fatal("handed on twice")
	}
	var none *Relay
	if none.Result("{}") != nil {
		t.Fatal("no relay, yet a result")
	}
}

package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/tools"
)

func TestSummarySaysWhatACallAsks(t *testing.T) {
	t.Parallel()
	type in struct {
		Amount  float64 `json:"amount"`
		OrderID string  `json:"order_id"`
	}
	tool := tools.MustNew(tools.Definition[in]{Name: "issue_refund", Summary: "Refund {amount:money} on order {order_id}{missing}",
		Risk: tools.RiskHighWrite, Run: func(context.Context, tools.Call, in) (any, error) { return nil, nil }})
	for args, want := range map[string]string{
		`{"amount":1200,"order_id":"B2001"}`:  "Refund $1,200.00 on order B2001?",
		`{"amount":9.5,"order_id":"A1\n001"}`: "Refund $9.50 on order A1 001?",
		`{}`:                                  "Refund ? on order ??",
	} {
		if got := tool.Summarize(args); got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
	tool.Summary = ""
	if got := tool.Summarize(`{}`); got != "Issue refund" {
		t.Errorf("no summary: %q", got)
	}
}

// A tool with no summary (an MCP server's) reads as its title and its first
// arguments in the order the call wrote them, each cut short; a hostile
// title is one short line.
func TestAToolWithNoSummaryReadsAsWords(t *testing.T) {
	t.Parallel()
	tool := &tools.Tool{Name: "fs__write_file", Upstream: "fs"}
	long := strings.Repeat("x", 100)
	for args, want := range map[string]string{
		`{"path":"/notes.txt","content":"hello\nworld"}`:      "Write file: path /notes.txt, content hello world",
		`{"path":"/a","mode":420,"opts":{"x":1},"more":true}`: `Write file: path /a, mode 420, opts {"x":1}`,
		`{"content":"` + long + `"}`:                          "Write file: content " + strings.Repeat("x", 40) + "…",
		`not json`:                                            "Write file",
		`{}`:                                                  "Write file",
	} {
		if got := tool.Summarize(args); got != want {
			t.Errorf("%s: %q, want %q", args, got, want)
		}
	}
	tool.Listing = []byte(`{"name":"write_file","title":"  Write a\nfile ` + long + `"}`)
	if got := tool.Title(); got != "Write a file "+strings.Repeat("x", 67)+"…" {
		t.Errorf("upstream title %q", got)
	}
	tool.Listing = []byte(`{"name":"write_file","annotations":{"title":"Save"}}`)
	if got := tool.Summarize(`{}`); got != "Save" {
		t.Errorf("annotations title %q", got)
	}
}

func TestDescribeRequestSpeaksToTheCustomer(t *testing.T) {
	t.Parallel()
	type in struct {
		Amount  float64 `json:"amount"`
		OrderID string  `json:"order_id"`
	}
	run := func(context.Context, tools.Call, in) (any, error) { return nil, nil }
	tool := tools.MustNew(tools.Definition[in]{Name: "issue_refund", Request: "your refund request of {amount:money} on order {order_id}",
		Risk: tools.RiskHighWrite, Run: run})
	if got, want := tool.DescribeRequest(`{"amount":1200,"order_id":"B2001"}`), "your refund request of $1,200.00 on order B2001"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	plain := tools.MustNew(tools.Definition[in]{Name: "open_ticket", Risk: tools.RiskLowWrite, Run: run})
	if got, want := plain.DescribeRequest(`{}`), "your request (open ticket)"; got != want {
		t.Errorf("no phrase: %q, want %q", got, want)
	}
}

package offline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/models"
)

func TestOfflineModelReadsAmountsOrRefusesThem(t *testing.T) {
	for _, tc := range []struct {
		msg    string
		amount float64 // 0: no call
		reply  string
	}{
		{"refund $45.50 on A1001", 45.5, ""},
		{"refund $1,200 on A1001.", 1200, ""},
		{"refund 30 dollars on A1001", 30, ""},
		{"refund -$50 on A1001", 0, "more than $0.00"},
		{"refund $-50 on A1001", 0, "more than $0.00"},
		{"refund minus 30 dollars on A1001", 0, "more than $0.00"},
		{"refund $0 on A1001", 0, "more than $0.00"},
		{"refund $12.345 on A1001", 0, "couldn't read that amount"},
		{"refund $1,2,3 on A1001", 0, "couldn't read that amount"},
		{"refund some money on A1001", 0, "How much should I refund"},
	} {
		r, err := Model{}.Next(context.Background(), llm.Request{Turns: []llm.Turn{{Role: models.RoleCustomer, Text: tc.msg}}})
		if err != nil {
			t.Fatal(err)
		}
		if tc.amount == 0 {
			if len(r.Calls) != 0 || !strings.Contains(r.Text, tc.reply) {
				t.Errorf("%q: calls %d, reply %q", tc.msg, len(r.Calls), r.Text)
			}
			continue
		}
		var args struct{ Amount float64 }
		if len(r.Calls) != 1 || json.Unmarshal(r.Calls[0].Args, &args) != nil || args.Amount != tc.amount {
			t.Errorf("%q: %+v", tc.msg, r)
		}
	}
}

// What the offline model says is said to the customer: no "the customer",
// no broken phrases.
func TestOfflineModelSpeaksToTheCustomer(t *testing.T) {
	for _, tc := range []struct {
		r    llm.ToolResult
		want string
	}{
		{llm.ToolResult{Tool: "cancel_order", Args: []byte(`{"order_id":"A1003"}`), Status: models.CallRejected, Error: "rejected by staff: already packed",
			Request: "your request to cancel order A1003"},
			"a team member declined the request to cancel order A1003. Their reason: already packed."},
		{llm.ToolResult{Tool: "issue_refund", Args: []byte(`{"order_id":"A1002","amount":150}`), OriginalArgs: []byte(`{"order_id":"A1002","amount":300}`),
			Status: models.CallSucceeded, Output: []byte(`{"order_id":"A1002","refunded":"$150.00"}`)},
			"A team member changed the amount from $300.00 to $150.00 before approving it. Done: I refunded $150.00 on order A1002."},
		{llm.ToolResult{Tool: "get_order_status", Status: models.CallInvalid, Error: "this needs a signed-in customer: ask the customer to sign in to the shop first"},
			"Please sign in to the shop first"},
	} {
		if got := describeResult(&tc.r); !strings.Contains(got, tc.want) || strings.Contains(got, "the customer") {
			t.Errorf("%s %s: %q", tc.r.Tool, tc.r.Status, got)
		}
	}
}

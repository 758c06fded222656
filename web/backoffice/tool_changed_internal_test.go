package backoffice

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// The approver reads, before approving, that the call's tool went or
// changed since the call was made, and whether its arguments still fit.
func TestApproverIsToldTheToolChanged(t *testing.T) {
	mk := func(schema string) *tools.Tool {
		tool, err := tools.FromSpec(tools.Spec{Name: "transfer", Risk: tools.RiskHighWrite, Schema: []byte(schema)})
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	v1 := mk(`{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`)
	v2 := mk(`{"type":"object","properties":{"to":{"type":"string"}},"required":["to"],"description":"more words"}`)
	v3 := mk(`{"type":"object","properties":{"to":{"type":"integer"}},"required":["to"]}`)
	call := &models.ToolCall{Tool: "transfer", Args: `{"to":"acct_1"}`, ToolHash: v1.DefinitionHash()}
	for _, tc := range []struct {
		name string
		reg  []*tools.Tool
		want string
	}{
		{"same", []*tools.Tool{v1}, ""},
		{"described anew", []*tools.Tool{v2}, "changed since this call was made (its description"},
		{"input changed", []*tools.Tool{v3}, "no longer fit it"},
		{"gone", nil, "no longer offered"},
	} {
		reg, _ := tools.NewRegistry(tc.reg...)
		got := toolChanged(reg, call)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

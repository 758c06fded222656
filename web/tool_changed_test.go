package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/policy"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Through the staff API too: the action says its tool changed, and
// approving arguments that no longer fit is refused with why.
func TestStaffAPIToldTheToolChanged(t *testing.T) {
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	tok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	r := a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A1","amount":900},"session":"s"}`)
	id := callOf(t, r)["id"].(string)
	if r := a.do("GET", "/api/v1/actions/"+id, tok, ""); r.Status != 200 || r.Body["tool_changed"] != nil {
		t.Fatalf("before the change: %d %s", r.Status, r.Raw)
	}
	changed, err := tools.FromSpec(tools.Spec{Name: "refund_order", Risk: tools.RiskHighWrite,
		Schema: []byte(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"},"currency":{"type":"string"}},"required":["order_id","amount","currency"],"additionalProperties":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(changed)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	a.gate.Reload(reg, pol)
	r = a.do("GET", "/api/v1/actions/"+id, tok, "")
	if tc, _ := r.Body["tool_changed"].(string); !strings.Contains(tc, "no longer fit") {
		t.Fatalf("after the change: %s", r.Raw)
	}
	if r := a.do("POST", "/api/v1/actions/"+id+"/approve", tok, `{}`); r.Status != 409 || !strings.Contains(r.Raw, "changed since this call was made") {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
}

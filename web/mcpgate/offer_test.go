package mcpgate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// A server that lists the same tools in a new order has changed its list
// (tools/list follows its order): the clients are told so. The same list
// again tells them nothing.
func TestANewOrderOfAServersToolsIsAChangedList(t *testing.T) {
	t.Parallel()
	listed := func(places map[string]int) *tools.Registry {
		t.Helper()
		var ts []*tools.Tool
		for name, place := range places {
			tl, err := tools.FromSpec(tools.Spec{Name: name, Risk: tools.RiskRead, Schema: json.RawMessage(`{"type":"object"}`),
				Run: func(context.Context, tools.Call, map[string]any) (any, error) { return "ok", nil }})
			if err != nil {
				t.Fatal(err)
			}
			tl.Upstream, tl.Place, tl.ModernPlace = "crm", place, place
			ts = append(ts, tl)
		}
		reg, err := tools.NewRegistry(ts...)
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	first := listed(map[string]int{"find": 0, "tag": 1})
	gw, ag := &Gateway{}, &models.Agent{ID: "agt_1", Name: "bot"}
	s := mcp.NewServer(&mcp.Implementation{Name: "countersign", Version: "1"}, nil)
	gw.Offer(s, ag, false, nil, first)
	changed := make(chan struct{}, 8)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	told := func() bool {
		select {
		case <-changed:
			for len(changed) > 0 {
				<-changed
			}
			return true
		case <-time.After(time.Second):
			return false
		}
	}
	same := listed(map[string]int{"find": 0, "tag": 1})
	gw.Offer(s, ag, false, first, same)
	if told() {
		t.Error("the same list again was told as a change")
	}
	reordered := listed(map[string]int{"find": 1, "tag": 0})
	gw.Offer(s, ag, false, same, reordered)
	if !told() {
		t.Error("the clients were not told of the server's new order")
	}
}

package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// heldGet is a long poll started on its own goroutine; its answer comes on
// the channel.
func heldGet(a *app, path, key string) chan apiResp {
	out := make(chan apiResp, 1)
	go func() {
		req, _ := http.NewRequest("GET", a.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := a.srv.Client().Do(req)
		if err != nil {
			out <- apiResp{Status: -1, Raw: err.Error()}
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		r := apiResp{Status: res.StatusCode, Raw: string(raw)}
		_ = json.Unmarshal(raw, &r.Body)
		out <- r
	}()
	return out
}

// Requests held open are capped per agent key and in all: over the cap the
// answer comes at once (429 or 503, with Retry-After), and /healthz and the
// staff API keep answering. Revoking a key ends its held requests and
// cancels its waiting actions.
func TestHeldRequestsAreCappedAndEndWithTheKey(t *testing.T) {
	a, _ := gateAPIAppWith(t, func(cfg *web.Config) {
		cfg.MaxHeldPerAgent, cfg.MaxHeld = 3, 5
	})
	ctx := context.Background()
	keys := map[string]string{}
	for _, name := range []string{"bot-a", "bot-b", "bot-c"} {
		k, _, err := a.accounts.AddAgent(ctx, name, models.Actor{ID: "test"})
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = k
	}
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	staffTok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	pendingCall := func(key, order string) string {
		r := a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"`+order+`","amount":900},"session":"s-`+order+`"}`)
		if c := callOf(t, r); c["status"] != "pending" {
			t.Fatalf("refund: %d %s", r.Status, r.Raw)
		}
		return callOf(t, r)["id"].(string)
	}
	aCall, bCall, cCall := pendingCall(keys["bot-a"], "A1"), pendingCall(keys["bot-b"], "B1"), pendingCall(keys["bot-c"], "C1")

	var held []chan apiResp
	waitHeld := func(total int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if got := a.server.HeldRequests(); got == total {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d requests held, want %d", a.server.HeldRequests(), total)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 3 {
		held = append(held, heldGet(a, "/api/v1/calls/"+aCall+"?wait=30s", keys["bot-a"]))
	}
	waitHeld(3)
	r := a.do("GET", "/api/v1/calls/"+aCall+"?wait=30s", keys["bot-a"], "")
	if r.Status != 429 || errCode(r) != "rate_limited" || r.Header.Get("Retry-After") == "" || !strings.Contains(r.Raw, "3 requests waiting") {
		t.Fatalf("a 4th held request of one key: %d %s %v", r.Status, r.Raw, r.Header)
	}
	// Without wait it is not held, and answers.
	if r := a.do("GET", "/api/v1/calls/"+aCall, keys["bot-a"], ""); r.Status != 200 {
		t.Fatalf("a plain read over the cap: %d %s", r.Status, r.Raw)
	}
	for range 2 {
		held = append(held, heldGet(a, "/api/v1/calls/"+bCall+"?wait=30s", keys["bot-b"]))
	}
	waitHeld(5)
	r = a.do("GET", "/api/v1/calls/"+cCall+"?wait=30s", keys["bot-c"], "")
	if r.Status != 503 || errCode(r) != "unavailable" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap in all: %d %s", r.Status, r.Raw)
	}
	// Everyone else is still served.
	if r := a.do("GET", "/healthz", "", ""); r.Status != 200 {
		t.Fatalf("/healthz while held: %d", r.Status)
	}
	if r := a.do("GET", "/api/v1/actions?status=pending", staffTok, ""); r.Status != 200 || len(r.Body["actions"].([]any)) != 3 {
		t.Fatalf("the staff API while held: %d %s", r.Status, r.Raw)
	}

	// Revoking bot-a ends its three long polls within moments, with its
	// action cancelled; bot-b's go on.
	cancelled, err := a.accounts.RevokeAgent(ctx, "bot-a", models.Actor{ID: "test"})
	if err != nil || len(cancelled) != 1 || cancelled[0] != aCall {
		t.Fatalf("revoke: %v %v", cancelled, err)
	}
	for i := range 3 {
		select {
		case r := <-held[i]:
			if r.Status != 200 || callOf(t, r)["status"] != "cancelled" || !strings.Contains(r.Raw, models.RevokedAgentReason) {
				t.Fatalf("a revoked agent's long poll: %d %s", r.Status, r.Raw)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a revoked agent's long poll went on")
		}
	}
	waitHeld(2)
	if c, _ := a.store.ToolCall(ctx, aCall); c.Status != models.CallCancelled {
		t.Fatalf("the revoked agent's action is %s", c.Status)
	}
	if r := a.do("POST", "/api/v1/actions/"+aCall+"/approve", staffTok, `{}`); r.Status != 409 {
		t.Fatalf("approving the revoked agent's action: %d %s", r.Status, r.Raw)
	}
	// The freed places serve others.
	held = append(held, heldGet(a, "/api/v1/calls/"+cCall+"?wait=30s", keys["bot-c"]))
	waitHeld(3)
	if r := a.do("POST", "/api/v1/actions/"+bCall+"/reject", staffTok, `{"reason":"no"}`); r.Status != 200 {
		t.Fatalf("reject: %d %s", r.Status, r.Raw)
	}
	for i := 3; i < 5; i++ {
		if r := <-held[i]; callOf(t, r)["status"] != "rejected" {
			t.Fatalf("bot-b's long poll after the rejection: %s", r.Raw)
		}
	}
	if r := a.do("POST", "/api/v1/actions/"+cCall+"/reject", staffTok, `{"reason":"no"}`); r.Status != 200 {
		t.Fatalf("reject: %d %s", r.Status, r.Raw)
	}
	<-held[5]
	waitHeld(0)
}

// An agent key opens at most so many MCP sessions; closing one makes room.
func TestMCPSessionsPerAgentAreCapped(t *testing.T) {
	a, _ := gateAPIAppWith(t, func(cfg *web.Config) { cfg.MaxMCPSessionsPerAgent = 2 })
	key, _, err := a.accounts.AddAgent(context.Background(), "desk", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	one, err := mcpSessionClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	// (Sessions are the 2025 revisions'; a stateless client opens none.)
	var two *mcp.ClientSession
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if two, err = mcpSessionClient(t, a.srv.URL, key); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	if _, err := mcpSessionClient(t, a.srv.URL, key); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("a third session: %v", err)
	}
	if _, err := two.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("an open session over the cap: %v", err)
	}
	one.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := mcpSessionClient(t, a.srv.URL, key)
		if err == nil {
			s.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing one: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An agent key sends so many calls a second after a burst; past that it is
// told to slow down (429, Retry-After), and another key is not.
func TestAgentCallsAreRateLimited(t *testing.T) {
	a, _ := gateAPIAppWith(t, func(cfg *web.Config) { cfg.AgentCallsPerSecond, cfg.AgentCallBurst = 1, 3 })
	ctx := context.Background()
	fast, _, _ := a.accounts.AddAgent(ctx, "fast", models.Actor{ID: "test"})
	calm, _, _ := a.accounts.AddAgent(ctx, "calm", models.Actor{ID: "test"})
	body := `{"tool":"lookup_order","args":{"order_id":"A1"},"session":"s"}`
	for i := range 3 {
		if r := a.do("POST", "/api/v1/calls", fast, body); r.Status != 201 {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := a.do("POST", "/api/v1/calls", fast, body)
	if r.Status != 429 || errCode(r) != "rate_limited" || r.Header.Get("Retry-After") == "" || !strings.Contains(r.Raw, "faster than it may") {
		t.Fatalf("the 4th at once: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/calls", calm, body); r.Status != 201 {
		t.Fatalf("another key: %d %s", r.Status, r.Raw)
	}

	// An agent that legitimately reads faster gets limits of its own
	// (countersign agent add/limits), at once, without a restart.
	if err := a.store.SetAgentLimits(ctx, "fast", models.AgentLimits{CallsPerSecond: 1000, CallBurst: 50}, models.Actor{ID: "test"}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if r := a.do("POST", "/api/v1/calls", fast, body); r.Status != 201 {
			t.Fatalf("call %d under the agent's own limit: %d %s", i, r.Status, r.Raw)
		}
	}
	// And a limit of its own on what may wait for a person.
	if err := a.store.SetAgentLimits(ctx, "calm", models.AgentLimits{MaxWaiting: 1}, models.Actor{ID: "test"}); err != nil {
		t.Fatal(err)
	}
	refund := func(order, session string) apiResp {
		return a.do("POST", "/api/v1/calls", calm, `{"tool":"refund_order","args":{"order_id":"`+order+`","amount":900},"session":"`+session+`"}`)
	}
	if r := refund("A7", "s1"); r.Status != 201 || !strings.Contains(r.Raw, `"pending"`) {
		t.Fatalf("the first held call: %d %s", r.Status, r.Raw)
	}
	if r := refund("A8", "s2"); !strings.Contains(r.Raw, "limit:pending_per_agent") {
		t.Fatalf("a second held call past the agent's own limit of 1: %d %s", r.Status, r.Raw)
	}
}

// A key revoked by the command line, in another process the bus does not
// hear (on SQLite), still ends what the agent holds open: the core's sweep
// finds the revocation and tells the same way.
func TestARevocationTheBusDidNotCarryEndsHeldRequests(t *testing.T) {
	a, _ := gateAPIAppWith(t, nil)
	ctx := context.Background()
	key, ag, err := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r := a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A1","amount":900},"session":"s-A1"}`)
	call, _ := callOf(t, r)["id"].(string)
	held := heldGet(a, "/api/v1/calls/"+call+"?wait=60s", key)
	for deadline := time.Now().Add(10 * time.Second); a.server.HeldRequests() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long poll was not held")
		}
	}
	if _, err := a.store.RevokeAgent(ctx, ag.ID, "host"); err != nil { // as `countersign agent revoke` does
		t.Fatal(err)
	}
	select {
	case r := <-held:
		if r.Status != 200 || callOf(t, r)["status"] != "cancelled" {
			t.Fatalf("the revoked agent's long poll: %d %s", r.Status, r.Raw)
		}
	case <-time.After(3 * core.SweepEvery):
		t.Fatal("a revocation by the command line left the agent's long poll open")
	}
}

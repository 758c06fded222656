package web_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
)

//go:embed testdata/axe/axe.min.js
var axeSource string

type axeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	Targets []string `json:"targets"`
}

// axeCheck runs axe-core on the page as it is and returns its violations.
func axeCheck(t *testing.T, ctx context.Context) []axeViolation {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](axeSource+";true")); err != nil {
		t.Fatalf("load axe: %v", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v =>
		({id: v.id, impact: v.impact, help: v.help, targets: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe: %v", err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

// Every page people use passes axe-core with no violation: the back office
// in each state, the sign-in page, the demo shop and the chat frame.
func TestBrowserEveryPagePassesAxe(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@x.test", "Ada Admin")
	a.staff(models.Approver, "ann@x.test", "Ann Approver")
	browser := newBrowser(t)
	// Thirty pages, each checked by axe: more than a minute on a
	// loaded machine (seen in CI).
	guest, ada := personFor(t, browser, 4*time.Minute), personFor(t, browser, 4*time.Minute)
	pending := a.pendingRefund("it arrived broken")
	decided := a.pendingRefund("the box was empty")
	if _, err := a.gate.Approve(context.Background(), decided.ID, models.Actor{ID: "stf_x", Name: "X", Role: models.Supervisor}, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	// Bob's refund approved with a standing grant, so /policy lists one.
	bobs := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":100,"reason":"scratched"}`)
	if _, err := a.gate.Approve(context.Background(), bobs.CallID, models.Actor{ID: "stf_x", Name: "X", Role: models.Supervisor},
		gate.ApproveRequest{Grant: &gate.GrantRequest{Uses: 2, For: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	// An outside agent's call, waiting, over the gate API.
	key, _, err := a.accounts.AddAgent(context.Background(), "support-bot", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	outside := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"issue_refund","args":{"order_id":"B2001","amount":80,"reason":"dented"},"session":"conv-1","customer_id":"cus_bob","context":"The customer sent a photo."}`))
	outsideRun, _ := a.store.ToolCall(context.Background(), outside["id"].(string))
	// An MCP client asking an admin for access (OAuth).
	asker := &oauthClient{t: t, base: a.srv.URL, redirect: "http://127.0.0.1:33421/cb",
		http: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	asker.register("Desk Assistant")
	consent := asker.authorize(nil).Header.Get("Location")
	// A proposed policy version, for its page and the diff.
	token, err := a.accounts.CreateAPIToken(context.Background(), "ada@x.test", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	proposed := versionOf(t, a.do("POST", "/api/v1/policy/versions", token, proposeBody(raised, "up to $60")))
	pages := []struct {
		who         context.Context
		path, ready string
		shot        string
	}{
		{guest, "/login", "input[name=email]", "login"},
		{guest, "/demo?as=cus_alice", "[data-countersign=launcher]", "demo-page"},
		{guest, "/chat", "[data-testid=chat-input]", "chat-frame"},
		{ada, "/queue", "[data-testid=queue-row]", "queue-rows"},
		{ada, "/actions/" + pending.ID, "[data-testid=approve]", "action-pending"},
		{ada, "/actions/" + decided.ID, "[data-testid=action-status]", "action-decided"},
		{ada, "/runs", "main", "runs"},
		{ada, "/runs/" + pending.RunID, "main", "run"},
		{ada, "/actions/" + outsideRun.ID, "[data-testid=agent-facts]", "action-outside-agent"},
		{ada, "/runs/" + outsideRun.RunID, "[data-testid=session-calls]", "run-outside-agent"},
		{ada, "/audit", "[data-testid=audit]", "audit-list"},
		{ada, "/policy", "[data-testid=revoke-grant]", "policy"},
		{ada, "/policy/versions/" + jsonID(proposed), "[data-testid=version-status]", "policy-version"},
		{ada, "/policy/diff?from=1&to=" + jsonID(proposed), "[data-testid=diff]", "policy-diff"},
		{ada, "/insights", "[data-testid=insight-rules]", "insights"},
		{ada, "/tools", "main", "tools"},
		{ada, "/staff", "main", "staff"},
		{ada, consent, "[data-testid=oauth-consent]", "oauth-consent"},
	}
	signInBrowser(t, ada, a.srv.URL, "ada@x.test")
	// Desktop, then a phone: axe on each, and a screenshot of each for
	// people to look at (test artefacts).
	for _, screen := range []struct {
		name string
		set  chromedp.Action[chromedp.Void]
	}{
		{"desktop", chromedp.EmulateViewport(1440, 900)},
		{"phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)},
	} {
		for _, p := range pages {
			if err := chromedp.Do(p.who, screen.set, chromedp.Navigate(a.srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready))); err != nil {
				t.Fatalf("%s on a %s: %v", p.path, screen.name, err)
			}
			for _, v := range axeCheck(t, p.who) {
				t.Errorf("%s on a %s: %s (%s): %s at %s", p.path, screen.name, v.ID, v.Impact, v.Help, strings.Join(v.Targets, " | "))
			}
			// Nothing but a table's own scrolling box is wider than the screen.
			if wide, _ := chromedp.Run(p.who, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > innerWidth + 1`)); wide {
				t.Errorf("%s on a %s scrolls sideways", p.path, screen.name)
			}
			screenshot(t, p.who, "page-"+p.shot+"-"+screen.name)
		}
	}
}

package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// An approver approves a refund whose backend is slow: the page answers at
// once that it is running, and shows the outcome when the backend answers,
// without a reload; closing the page would not have cut the call.
func TestBrowserSlowToolOutcomeArrivesLive(t *testing.T) {
	release := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"refund_id":"rf_slow"}`))
	}))
	defer backend.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	set, err := httptool.Load([]byte(`tools:
  - name: refund_order
    risk: high_write
    input_schema: {type: object, properties: {order_id: {type: string}, amount: {type: number}}, required: [order_id, amount], additionalProperties: false}
    http: {method: POST, url: "`+backend.URL+`/refunds", timeout: 30s}
`), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	// The approval waits 200 ms for the call, not for the backend.
	a := startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(), ExecutionWait: 200 * time.Millisecond}, false)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "support-bot", models.Actor{ID: "test"})
	id := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"O1","amount":900},"session":"s1"}`))["id"].(string)
	a.staff(models.Approver, "ann@x.test", "Ann Approver")
	ann := person(t, newBrowser(t))
	signInBrowser(t, ann, a.srv.URL, "ann@x.test")
	err = chromedp.Do(ann, chromedp.Navigate(a.srv.URL+"/actions/"+id), chromedp.Click(chromedp.CSS(`[data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=flash]`)))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, ann, `[data-testid=flash]`, "The call is running")
	// The stream swaps the status in as soon as it opens: read it once it is there.
	waitFor(t, ann, "the status says the call runs", `(document.querySelector("[data-testid=action-status]") || {textContent: ""}).textContent.includes("executing")`)
	close(release)
	waitFor(t, ann, "the outcome arrives on the open page", `(document.querySelector("[data-testid=action-status]") || {textContent: ""}).textContent.includes("succeeded")`)
	screenshot(t, ann, "action-slow-tool-succeeded")
	if c, _ := a.store.ToolCall(ctx, id); c.Status != models.CallSucceeded || !strings.Contains(c.Result, "rf_slow") {
		t.Fatalf("call %s %s", c.Status, c.Result)
	}
}

package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// The widget as customers meet it: a shop on its own site over HTTPS
// (https://shop.test) embeds Countersign served from another site
// (https://127.0.0.1). The chat frame is then a third party: its
// conversation cookie only comes back because it is SameSite=None, Secure
// and Partitioned, and the browser contexts chromedp opens block ordinary
// third-party cookies, as incognito windows do.
func TestBrowserWidgetCrossSiteOverTLS(t *testing.T) {
	tok := token(t, secret, "cus_alice", "Alice", time.Hour)
	var csURL string
	shopSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Shop</title></head>
<body><h1>Acme Shop</h1><script src="%s/widget.js" data-customer-token="%s" async></script></body></html>`, csURL, tok)
	}))
	shopSrv.StartTLS()
	t.Cleanup(shopSrv.Close)
	u, _ := url.Parse(shopSrv.URL)
	shopURL := "https://shop.test:" + u.Port()

	a := newAppServer(t, func(c *web.Config) { c.WidgetOrigins = []string{shopURL} }, true)
	csURL = a.srv.URL
	if !strings.HasPrefix(csURL, "https://127.0.0.1:") {
		t.Fatalf("countersign at %s", csURL)
	}
	a.staff(models.Approver, "ann@x.test", "Ann")
	staffToken, err := a.accounts.CreateAPIToken(context.Background(), "ann@x.test", models.Actor{})
	if err != nil {
		t.Fatal(err)
	}

	ctx := person(t, newBrowser(t))
	frame, frameID := openCrossSiteWidget(t, ctx, shopURL, csURL, "")
	if err := chromedp.Do(frame, chromedp.WaitVisible(chromedp.CSS(`#identity strong`))); err != nil {
		t.Fatalf("identity: %v", err)
	}
	err = chromedp.Do(frame,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), "refund $900 on order A1002 because it arrived broken"),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitForText(t, frame, inTarget, "A team member is reviewing your refund request of $900.00")

	r := a.do("GET", "/api/v1/actions?status=pending", staffToken, "")
	actions, _ := r.Body["actions"].([]any)
	if len(actions) != 1 {
		t.Fatalf("pending actions: %s", r.Raw)
	}
	id := actions[0].(map[string]any)["id"].(string)
	if r := a.do("POST", "/api/v1/actions/"+id+"/approve", staffToken, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	waitForText(t, frame, inTarget, "Done: I refunded $900.00 on order A1002")
	screenshot(t, ctx, "widget-cross-site")

	// Reload the shop: the third-party frame finds its conversation again.
	frame, _ = openCrossSiteWidget(t, ctx, shopURL, csURL, frameID)
	waitForText(t, frame, inTarget, "Done: I refunded $900.00 on order A1002")
}

// inTarget queries the whole document of the context's own target.
func inTarget(*chromedp.Selector) {}

// openCrossSiteWidget opens the widget on the shop's page and returns a
// context attached to the chat frame. A frame from another site runs in a
// process of its own (site isolation), so it is driven as its own target
// rather than through the shop page's DOM; skip is the frame target of an
// earlier load.
func openCrossSiteWidget(t *testing.T, ctx context.Context, shopURL, csURL string, skip target.ID) (context.Context, target.ID) {
	t.Helper()
	clickLauncher(t, ctx, shopURL)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			if info.Type == "iframe" && info.TargetID != skip && strings.HasPrefix(info.URL, csURL+"/chat") {
				frame, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(info.TargetID))
				t.Cleanup(cancel)
				if err := chromedp.Do(frame, chromedp.WaitVisible(chromedp.CSS(`[data-testid=chat-input]`))); err != nil {
					t.Fatalf("the chat frame did not load: %v", err)
				}
				return frame, info.TargetID
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no chat frame target")
	return nil, ""
}

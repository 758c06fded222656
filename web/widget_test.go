package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// shopSite is a second server, on another origin, that plays the shop: its
// page embeds the widget with a customer token it signed.
func shopSite(t *testing.T, countersign *string, token *string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>Shop</title><style>body{font-family:serif;color:red}</style></head>
<body><h1>Acme Shop</h1><p>Everything for your kitchen.</p>
<script src="%s/widget.js" data-customer-token="%s" async></script></body></html>`, *countersign, *token)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func widgetApp(t *testing.T) (*app, *string, *httptest.Server) {
	t.Helper()
	csURL, tok := new(string), new(string)
	shop := shopSite(t, csURL, tok)
	a := newAppWith(t, func(c *web.Config) { c.WidgetOrigins = []string{shop.URL} })
	*csURL = a.srv.URL
	return a, tok, shop
}

// clickLauncher loads the shop's page and opens the widget's panel.
func clickLauncher(t *testing.T, ctx context.Context, shopURL string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(shopURL),
		chromedp.WaitVisible(chromedp.CSS(`[data-countersign=launcher]`)),
		chromedp.Click(chromedp.CSS(`[data-countersign=launcher]`)),
		chromedp.WaitVisible(chromedp.CSS(`iframe[data-countersign=frame]`)),
	)
	if err != nil {
		t.Fatalf("open the widget: %v", err)
	}
}

func openWidget(t *testing.T, ctx context.Context, shopURL string) chromedp.QueryOption {
	t.Helper()
	clickLauncher(t, ctx, shopURL)
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(`iframe[data-countersign=frame]`)))
	if err != nil || len(nodes) == 0 {
		t.Fatalf("no chat frame: %v", err)
	}
	in := chromedp.FromNode(nodes[0])
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid=chat-input]`), in)); err != nil {
		t.Fatalf("the chat frame did not load: %v", err)
	}
	return in
}

func TestBrowserWidgetAcrossOriginsShowsPendingThenOutcome(t *testing.T) {
	a, tok, shop := widgetApp(t)
	*tok = token(t, secret, "cus_alice", "Alice", time.Hour)
	a.staff(models.Approver, "ann@x.test", "Ann")
	staffToken, err := a.accounts.CreateAPIToken(context.Background(), "ann@x.test", models.Actor{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := person(t, newBrowser(t))
	in := openWidget(t, ctx, shop.URL)

	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#identity strong`), in)); err != nil {
		t.Fatalf("identity: %v", err)
	}
	if who, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#identity`), in)); !strings.Contains(who, "Signed in as Alice") {
		t.Fatalf("identity %q", who)
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), "refund $900 on order A1002 because it arrived broken", in),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`), in),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, in, "A team member is reviewing your refund request of $900.00")
	screenshot(t, ctx, "widget-pending")

	// Staff approve through the staff API; the widget shows the outcome live.
	r := a.do("GET", "/api/v1/actions?status=pending", staffToken, "")
	id := r.Body["actions"].([]any)[0].(map[string]any)["id"].(string)
	if r := a.do("POST", "/api/v1/actions/"+id+"/approve", staffToken, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	waitForText(t, ctx, in, "Done: I refunded $900.00 on order A1002")
	screenshot(t, ctx, "widget-outcome")

	// History survives a reload of the shop page.
	in = openWidget(t, ctx, shop.URL)
	waitForText(t, ctx, in, "Done: I refunded $900.00 on order A1002")
}

// waitForText polls the chat log until it shows want: what a customer sees,
// without a reload.
func waitForText(t *testing.T, ctx context.Context, in chromedp.QueryOption, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var log string
	for time.Now().Before(deadline) {
		log, _ = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=chat-log]`), in))
		if strings.Contains(log, want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the chat never showed %q; it shows:\n%s", want, log)
}

func TestBrowserWidgetWithForgedTokenIsAGuest(t *testing.T) {
	a, tok, shop := widgetApp(t)
	_ = a
	*tok = token(t, "not-the-shop-secret-not-the-shop-secret", "cus_alice", "Alice", time.Hour)
	ctx := person(t, newBrowser(t))
	in := openWidget(t, ctx, shop.URL)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid=identity-guest]`), in)); err != nil {
		t.Fatalf("guest notice: %v", err)
	}
	text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=identity-guest]`), in))
	if !strings.Contains(text, "sign in to the shop") {
		t.Fatalf("notice %q", text)
	}
	screenshot(t, ctx, "widget-guest")
}

// chatClient posts to the chat frame as the frame's own htmx does.
type chatClient struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newChatClient(t *testing.T, base string) *chatClient {
	jar, _ := cookiejar.New(nil)
	return &chatClient{t: t, base: base, client: &http.Client{Jar: jar}}
}

func (c *chatClient) send(text, customerToken string, htmx bool) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+"/chat/messages", strings.NewReader(url.Values{"text": {text}, "customer_token": {customerToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if htmx {
		req.Header.Set("HX-Request", "true")
	}
	res, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b := new(strings.Builder)
	_, _ = fmt.Fprint(b, readAll(res))
	return res.StatusCode, b.String()
}

func readAll(res *http.Response) string {
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

func TestChatFrameHeadersAndLimits(t *testing.T) {
	a, _, shop := widgetApp(t)
	res, err := http.Get(a.srv.URL + "/chat")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'self' "+shop.URL) || strings.Contains(csp, "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "" {
		t.Fatalf("chat CSP %q, XFO %q", csp, res.Header.Get("X-Frame-Options"))
	}
	// The back office stays unframeable.
	res, _ = http.Get(a.srv.URL + "/login")
	res.Body.Close()
	if !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatal("login page can be framed")
	}

	c := newChatClient(t, a.srv.URL)
	if code, _ := c.send("hello", "", false); code != http.StatusForbidden {
		t.Fatalf("post without HX-Request (a cross-site form): %d", code)
	}
	if code, body := c.send(strings.Repeat("x", runloop.MaxMessageRunes+1), "", true); code != 400 || !strings.Contains(body, "the limit is 4000") {
		t.Fatalf("long message: %d %.300s", code, body)
	}
	code, body := c.send("hello", "", true)
	if code != 200 || !strings.Contains(body, "I can check your orders") {
		t.Fatalf("first message: %d %.500s", code, body)
	}
	limited := false
	for i := 0; i < 12; i++ {
		code, body = c.send("hello again", "", true)
		if code == http.StatusTooManyRequests {
			limited = strings.Contains(body, "sending messages very quickly")
			break
		}
	}
	if !limited {
		t.Fatalf("no per-conversation rate limit: last %d %.300s", code, body)
	}
}

func TestChatNeverCrossesCustomers(t *testing.T) {
	a, _, _ := widgetApp(t)
	c := newChatClient(t, a.srv.URL)
	alice := token(t, secret, "cus_alice", "Alice", time.Hour)
	bob := token(t, secret, "cus_bob", "Bob", time.Hour)
	if code, body := c.send("where is A1002?", alice, true); code != 200 || !strings.Contains(body, "Espresso machine") {
		t.Fatalf("alice: %d %.500s", code, body)
	}
	// Same browser, now signed in as Bob: a new conversation, not Alice's.
	code, body := c.send("what are my orders?", bob, true)
	if code != 200 || strings.Contains(body, "Espresso machine") || !strings.Contains(body, "B2001") {
		t.Fatalf("bob sees: %d %.800s", code, body)
	}
	// A guest in that browser cannot read Bob's conversation either.
	code, body = c.send("hi", "", true)
	if code != 200 || strings.Contains(body, "B2001") {
		t.Fatalf("guest sees: %d %.800s", code, body)
	}
}

func TestForwardedForCannotDodgeThePerAddressLimit(t *testing.T) {
	a, _, _ := widgetApp(t)
	limited := false
	for i := 0; i < 30 && !limited; i++ {
		c := newChatClient(t, a.srv.URL) // a new conversation each time
		req, _ := http.NewRequest("POST", a.srv.URL+"/chat/messages", strings.NewReader("text=hi"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		res, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		limited = res.StatusCode == http.StatusTooManyRequests
	}
	if !limited {
		t.Fatal("a forged X-Forwarded-For header dodged the per-address limit")
	}
}

package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

func TestBrowserDemoPageEmbedsTheWidget(t *testing.T) {
	a := newApp(t)
	ctx := person(t, newBrowser(t))
	in := openWidget(t, ctx, a.srv.URL+"/demo?as=cus_alice")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#identity strong`), in)); err != nil {
		t.Fatalf("the demo page did not sign Alice in: %v", err)
	}
	err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), "where is my order A1001?", in),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`), in))
	if err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, in, "Order A1001 (Trail running shoes, $120.00) is on its way.")
	screenshot(t, ctx, "demo")
}

package web_test

import (
	"strings"
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

// At 1440×900 the open chat leaves the demo page's words readable: it
// covers none of them.
func TestBrowserTheOpenChatCoversNoneOfTheDemoPage(t *testing.T) {
	a := newApp(t)
	ctx := person(t, newBrowser(t))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900)); err != nil {
		t.Fatal(err)
	}
	openWidget(t, ctx, a.srv.URL+"/demo?as=cus_alice")
	covered, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const p = document.querySelector("[data-countersign=panel]").getBoundingClientRect();
		return [...document.querySelectorAll("main p, main li, main h1, main h2, main label, main button, main select")].filter(e => {
			const r = e.getBoundingClientRect();
			return r.width > 0 && r.right > p.left && r.left < p.right && r.bottom > p.top && r.top < p.bottom;
		}).map(e => e.tagName + ": " + e.textContent.trim().slice(0, 60)); })()`))
	screenshot(t, ctx, "demo-chat-open-1440")
	if err != nil || len(covered) > 0 {
		t.Fatalf("the open chat covers (%v):\n%s", err, strings.Join(covered, "\n"))
	}
}

// On a phone the panel takes the whole screen and the chat still works.
func TestBrowserWidgetOnAPhone(t *testing.T) {
	a := newApp(t)
	ctx := person(t, newBrowser(t))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatal(err)
	}
	in := openWidget(t, ctx, a.srv.URL+"/demo?as=cus_bob")
	size, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector("[data-countersign=panel]").getBoundingClientRect(); return [r.width, r.height, window.innerWidth, window.innerHeight]; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if size[0] < size[2]-1 || size[1] < size[3]-1 {
		t.Fatalf("panel %vx%v on a %vx%v screen", size[0], size[1], size[2], size[3])
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), "what are my orders?", in),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`), in))
	if err != nil {
		t.Fatal(err)
	}
	waitForText(t, ctx, in, "B2001 (Road bike, $1,500.00) was delivered")
	screenshot(t, ctx, "widget-phone")
	// The panel's own close button brings the launcher back, focused.
	err = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#chat-close`), in), chromedp.WaitVisible(chromedp.CSS(`[data-countersign=launcher]`)))
	if err != nil {
		t.Fatal(err)
	}
	focused, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.getAttribute("data-countersign") || ""`))
	if focused != "launcher" {
		t.Fatalf("focus went to %q", focused)
	}
}

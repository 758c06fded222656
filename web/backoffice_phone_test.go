package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
)

// An approver on a phone can read the queue and an action and reach the
// Approve and Reject buttons without the page scrolling sideways.
func TestBrowserBackOfficeOnAPhone(t *testing.T) {
	a := newApp(t)
	a.staff(models.Supervisor, "sam@x.test", "Sam Supervisor")
	ctx := person(t, newBrowser(t))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatal(err)
	}
	action := a.pendingRefund("it arrived broken")
	signInBrowser(t, ctx, a.srv.URL, "sam@x.test")

	fits := func(page string) {
		t.Helper()
		// The layout settles (the phone's viewport applied, the styles
		// laid out) before it is judged: a loaded machine can be asked
		// between the two.
		var size []float64
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var err error
			size, err = chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[document.documentElement.scrollWidth, screen.width]`))
			if err != nil {
				t.Fatal(err)
			}
			if size[0] <= size[1]+1 || time.Now().After(deadline) {
				break
			}
		}
		if size[0] > size[1]+1 {
			wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > screen.width + 1).slice(0, 5).map(e => e.tagName + '.' + e.className + '#' + (e.dataset.testid || ''))`))
			t.Errorf("%s is %v px wide on a %v px screen: it scrolls sideways (widest: %v)", page, size[0], size[1], wide)
		}
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-action-id="`+action.ID+`"]`))); err != nil {
		t.Fatal(err)
	}
	fits("the queue")
	screenshot(t, ctx, "phone-queue")

	err := chromedp.Do(ctx,
		chromedp.Navigate(a.srv.URL+"/actions/"+action.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=args]`)))
	if err != nil {
		t.Fatal(err)
	}
	fits("the action page")
	screenshot(t, ctx, "phone-action")
	for _, button := range []string{`[data-testid=approve]`, `[data-testid=edit-toggle]`} {
		inside, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const r = document.querySelector('`+button+`').getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= screen.width; })()`))
		if err != nil || !inside {
			t.Errorf("%s is not within the screen (%v)", button, err)
		}
	}

	for _, p := range []string{"/audit", "/runs", "/policy", "/tools"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+p), chromedp.WaitVisible(chromedp.CSS(`main`))); err != nil {
			t.Fatal(err)
		}
		fits(p)
		screenshot(t, ctx, "phone-"+p[1:])
	}

	// An admin's menu shows every page without scrolling sideways; the
	// insights' approver table and a run whose heading holds a long
	// session id stay within the screen.
	if _, err := a.gate.Approve(context.Background(), action.ID, models.Actor{ID: "stf_x", Name: "X", Role: models.Supervisor}, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	key, _, err := a.accounts.AddAgent(context.Background(), "support-bot", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("conversation", 12) // no place to break
	r := a.do("POST", "/api/v1/calls", key, `{"tool":"get_order_status","args":{"order_id":"A1002"},"session":"`+long+`","customer_id":"cus_alice"}`)
	call, err := a.store.ToolCall(context.Background(), callOf(t, r)["id"].(string))
	if err != nil {
		t.Fatalf("%d %s: %v", r.Status, r.Raw, err)
	}
	a.staff(models.Admin, "ada@x.test", "Ada Admin")
	admin := person(t, newBrowser(t))
	if err := chromedp.Do(admin, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatal(err)
	}
	signInBrowser(t, admin, a.srv.URL, "ada@x.test")
	ctx = admin
	for _, p := range []string{"/insights", "/runs/" + call.RunID, "/staff"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+p), chromedp.WaitVisible(chromedp.CSS(`main`))); err != nil {
			t.Fatal(err)
		}
		fits(p)
		screenshot(t, ctx, "phone-admin-"+strings.ReplaceAll(p[1:], "/", "-"))
	}
	// A proposal whose tests fail says so in a box that wraps its words
	// instead of scrolling them sideways.
	failing := "rules:\n  - name: " + strings.Repeat("a-rule-name-far-too-long-for-a-phone-", 3) + "\n    tool: no_such_tool_" + strings.Repeat("x", 80) + "\n    decision: allow\n"
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/policy"), chromedp.WaitVisible(chromedp.CSS(`main`))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('propose').open = true`)); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#propose-yaml`), failing),
		chromedp.Submit(chromedp.CSS(`#propose-yaml`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=propose-error]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if sideways, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector('[data-testid=propose-error] pre'); return e.scrollWidth > e.clientWidth + 1; })()`)); err != nil || sideways {
		t.Errorf("the proposal's error box scrolls sideways on a phone (%v)", err)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('header.top nav a')].filter(e => { const r = e.getBoundingClientRect(); return r.width === 0 || r.left < 0 || r.right > screen.width + 1; }).map(e => e.textContent.trim())`))
	if err != nil || len(hidden) > 0 {
		t.Errorf("menu entries out of view on a phone: %v %v", hidden, err)
	}
}

package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/models"
)

// The audit page opened before the chain's first verification finished
// shows the outcome when it comes, without a reload.
func TestBrowserTheAuditChainCheckArrivesWithoutAReload(t *testing.T) {
	a := newApp(t)
	a.staff(models.Auditor, "audrey@x.test", "Audrey Auditor")
	ctx := person(t, newBrowser(t))
	signInBrowser(t, ctx, a.srv.URL, "audrey@x.test")
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS("[data-testid=chain]"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the chain's check on the open page", `document.querySelector('[data-testid=chain]').textContent.includes("audit chain intact")`)
}

// On a phone (390×844), every control of /audit is a target at least
// 24 px on each side (WCAG 2.2, 2.5.8), and every page's first Tab reaches
// a link that skips to the content.
func TestBrowserAuditOnAPhoneHasTargetsAFingerCanHit(t *testing.T) {
	a := newApp(t)
	a.staff(models.Auditor, "audrey@x.test", "Audrey Auditor")
	a.pendingRefund("it broke")
	ctx := person(t, newBrowser(t))
	signInBrowser(t, ctx, a.srv.URL, "audrey@x.test")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(a.srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS("[data-testid=chain]"))); err != nil {
		t.Fatal(err)
	}
	small, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('a, button, input, select, textarea, summary')].filter(e => {
		const r = e.getBoundingClientRect(); if (r.width === 0 && r.height === 0) return false;
		if (e.classList.contains('skip')) return false;
		return r.width < 24 || r.height < 24; }).map(e => e.outerHTML.slice(0, 80) + ' ' + Math.round(e.getBoundingClientRect().width) + '×' + Math.round(e.getBoundingClientRect().height))`))
	if err != nil || len(small) > 0 {
		t.Errorf("%d targets under 24 px on /audit on a phone (%v):\n%s", len(small), err, strings.Join(small, "\n"))
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
		t.Fatal(err)
	}
	if first, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.dataset.testid || document.activeElement.outerHTML.slice(0, 60)`)); first != "skip-link" {
		t.Errorf("the first Tab reaches %q, not the skip link", first)
	}
}

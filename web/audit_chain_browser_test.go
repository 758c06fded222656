package web_test

import (
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

package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
)

// waitFor polls a JavaScript condition in the page.
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: never happened (%s)", what, js)
}

// pageSays waits up to 15 s for the first element matching sel to hold all of
// want, and returns its text; a page still loading or a live swap between
// "visible" and "read" is waited out, not reported as an empty text.
func pageSays(t *testing.T, ctx context.Context, sel string, want ...string) string {
	t.Helper()
	var text string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector(`+"`"+sel+"`"+`); return e ? e.textContent : ""; })()`))
		if err == nil {
			text = got
			all := true
			for _, w := range want {
				all = all && strings.Contains(got, w)
			}
			if all {
				return got
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never said %q; it says %q", sel, want, text)
	return ""
}

// The action page says what really happened, checks an edit before it
// runs, keeps its address after a failed post, follows decisions made
// elsewhere, and stops offering what is no longer possible.
func TestBrowserActionPageTellsTheTruth(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann Approver")
	a.staff(models.Supervisor, "sam@x.test", "Sam Supervisor")
	browser := newBrowser(t)
	ann, sam := person(t, browser), person(t, browser)
	signInBrowser(t, ann, a.srv.URL, "ann@x.test")
	signInBrowser(t, sam, a.srv.URL, "sam@x.test")
	action := a.pendingRefund("it arrived broken")
	page := a.srv.URL + "/actions/" + action.ID

	// An edit to more than the order has left is refused before anything
	// runs, in the form, and the browser stays on the action's address.
	err := chromedp.Do(ann, chromedp.Navigate(page),
		chromedp.Click(chromedp.CSS(`[data-testid=edit-toggle]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=field-amount]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=field-amount]`), "2000"),
		chromedp.Click(chromedp.CSS(`[data-testid=edit-approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=edit-error]`)))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, ann, `[data-testid=edit-error]`, "The edited call cannot work: only $950.00 of order A1002 is left to refund")
	if n, _ := chromedp.Run(ann, chromedp.Evaluate[int](`document.querySelectorAll("[data-testid=flash]").length`)); n != 0 {
		t.Fatal("a refused edit was announced as a success")
	}
	// The page's script puts its own address back once it runs: wait for
	// that (under load it runs after the error is visible), up to 5 s.
	if err := chromedp.Do(ann, chromedp.Poll[chromedp.Void](`location.pathname === "/actions/`+action.ID+`"`, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		path, _ := chromedp.Run(ann, chromedp.Evaluate[string](`location.pathname`))
		t.Fatalf("after a refused edit the browser is at %s (a reload would post again): %v", path, err)
	}
	screenshot(t, ann, "action-edit-refused")

	// Sam has the page open; Ann approves; Sam's forms stop offering a
	// decision, live.
	if err := chromedp.Do(sam, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`[data-testid=approve]`))); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ann, chromedp.Navigate(page), chromedp.Click(chromedp.CSS(`[data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=flash]`)))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, ann, "[data-testid=flash]", "Approved. The call ran")
	// Decided: no countdown, no "needs".
	if n, _ := chromedp.Run(ann, chromedp.Evaluate[int](`document.querySelectorAll("[data-testid=needs], [data-until]").length`)); n != 0 {
		t.Fatal("a decided action still shows what it needs and when it expires")
	}
	waitFor(t, sam, "Sam's Approve button is disabled", `(() => { const b = document.querySelector("[data-testid=approve]"); return !!b && b.disabled; })()`)
	screenshot(t, sam, "action-decided-elsewhere")

	// A two-person action: after Ann's approval, the page says where it
	// stands and does not offer Ann another Approve.
	two := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":1200}`)
	err = chromedp.Do(ann, chromedp.Navigate(a.srv.URL+"/actions/"+two.CallID), chromedp.Click(chromedp.CSS(`[data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=flash]`)))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, ann, "[data-testid=flash]", "1 of 2", "supervisor")
	if n, _ := chromedp.Run(ann, chromedp.Evaluate[int](`document.querySelectorAll("[data-testid=approve], [data-testid=edit-approve]").length`)); n != 0 {
		t.Fatal("Approve is still offered to the person who already approved")
	}
	screenshot(t, ann, "action-approved-once")
}

// The chat keeps the newest message in sight, shows every error where a
// screen reader announces it with the customer's text kept, and switching
// the demo customer never shows the previous one's conversation.
func TestBrowserChatScrollsShowsErrorsAndSwitchesCustomers(t *testing.T) {
	a := newApp(t)
	ctx := person(t, newBrowser(t))
	in := openWidget(t, ctx, a.srv.URL+"/demo?as=cus_alice")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#identity strong`), in)); err != nil {
		t.Fatal(err)
	}
	frame := `document.querySelector("iframe[data-countersign=frame]").contentDocument`
	// A person types the next message once the last one went (the box is
	// empty again, Send is not disabled): the reply can show on the live
	// stream before the send's own answer is back.
	sendable := frame + `.getElementById("msg").value === "" && !` + frame + `.querySelector("[data-testid=chat-send]").disabled`
	for i := 0; i < 6; i++ {
		waitFor(t, ctx, "Send ready", sendable)
		err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), "where is my order A1001?", in),
			chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`), in))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the reply", frame+`.querySelectorAll("#chat-log li.assistant").length >= `+string(rune('1'+i)))
	}
	waitFor(t, ctx, "the newest message in sight", `(() => { const b = `+frame+`.getElementById("conversation"); return b.scrollHeight > b.clientHeight && b.scrollTop + b.clientHeight >= b.scrollHeight - 4; })()`)

	// Too long: said in the alert region, and the text stays in the box.
	long := strings.Repeat("a", runloop.MaxMessageRunes+10)
	waitFor(t, ctx, "Send ready", sendable)
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const d = `+frame+`; const m = d.getElementById("msg"); m.removeAttribute("maxlength"); m.value = "`+long+`"; d.querySelector("[data-testid=chat-send]").click(); return true; })()`))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the error shown", frame+`.querySelector("[role=alert] [data-testid=chat-error]") !== null`)
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](frame+`.querySelector("[data-testid=chat-error]").textContent`))
	kept, _ := chromedp.Run(ctx, chromedp.Evaluate[int](frame+`.getElementById("msg").value.length`))
	if !strings.Contains(text, "The message is 4010 characters long; the limit is 4000.") || kept != len(long) {
		t.Fatalf("error %q, %d characters kept of %d", text, kept, len(long))
	}
	screenshot(t, ctx, "chat-error")

	// Bob on the same browser sees none of Alice's conversation.
	in = openWidget(t, ctx, a.srv.URL+"/demo?as=cus_bob")
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#identity strong`), in)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the identity's conversation swap
	who, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#identity`), in))
	log, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=chat-log]`), in))
	if !strings.Contains(who, "Bob") || strings.Contains(log, "A1001") {
		t.Fatalf("as Bob: identity %q, conversation %q", who, log)
	}
}

// The queue says its keys; after a decision, "n" goes on to the next
// action waiting, as the flash says.
func TestBrowserKeysGoThroughTheQueue(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann Approver")
	ann := person(t, newBrowser(t))
	signInBrowser(t, ann, a.srv.URL, "ann@x.test")
	first := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":300}`)
	second := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":200}`)
	err := chromedp.Do(ann, chromedp.Navigate(a.srv.URL+"/queue"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-keys]`)))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, ann, "[data-testid=queue-keys]", "j", "k", "Enter", "/")
	// j focuses the first row, Enter opens it.
	waitFor(t, ann, "the page's script", `document.readyState === "complete"`)
	// The live queue may swap its rows in between (a busy machine): a
	// person who sees nothing open loads the queue again and presses the
	// keys again.
	for try := 0; try < 5; try++ {
		if try > 0 {
			if err := chromedp.Do(ann, chromedp.Navigate(a.srv.URL+"/queue"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-keys]`))); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ann, "the page's script", `document.readyState === "complete"`)
		}
		if err := chromedp.Do(ann, chromedp.KeyEvent("j"), chromedp.KeyEvent("\r")); err != nil {
			t.Fatal(err)
		}
		var path string
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && path != "/actions/"+first.CallID; time.Sleep(100 * time.Millisecond) {
			path, _ = chromedp.Run(ann, chromedp.Evaluate[string](`location.pathname`))
		}
		if path == "/actions/"+first.CallID {
			break
		}
	}
	waitFor(t, ann, "the first action open", `location.pathname === "/actions/`+first.CallID+`"`)
	err = chromedp.Do(ann, chromedp.WaitVisible(chromedp.CSS(`[data-testid=approve]`)), chromedp.Click(chromedp.CSS(`[data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=next-in-queue]`)))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, ann, "[data-testid=next-in-queue]", "Next in queue", "n")
	waitFor(t, ann, "the page's script", `document.readyState === "complete"`)
	if _, err := chromedp.Run(ann, chromedp.Evaluate[bool](`document.activeElement && document.activeElement.blur(), true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ann, chromedp.KeyEvent("n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ann, "the next action open", `location.pathname === "/actions/`+second.CallID+`"`)
}

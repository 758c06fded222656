package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/chat"
)

// passkeyApp is the demo app whose refund rule asks for a passkey.
func passkeyApp(t *testing.T) (*app, string) { return passkeyAppWith(t, false) }

func passkeyAppWith(t *testing.T, admins bool) (*app, string) {
	t.Helper()
	dsn := storetest.DSN(t)
	store, err := storage.Open(dsn, storage.Options{Own: shop.Schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shop.On(store).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(shop.PolicyYAML), "    reason: \"Refund of {{ money(args.amount) }}\"\n    expires: 24h\n",
		"    reason: \"Refund of {{ money(args.amount) }}\"\n    expires: 24h\n    passkey: true\n", 1)
	if !strings.Contains(yaml, "passkey: true") {
		t.Fatal("the demo policy's refund rule moved")
	}
	reg, _ := tools.NewRegistry(shop.Tools(store)...)
	p, err := policy.LoadPolicy([]byte(yaml), "passkey", reg)
	if err != nil {
		t.Fatal(err)
	}
	return startApp(t, appConfig{Store: store, Tools: reg, Policy: p, Model: offline.Model{}, Business: shop.Facts{Store: store}, Log: discardLog(), SignWithPasskey: admins,
		Web: web.Config{Customers: chat.NewCustomerVerifier(secret), ReplyWait: 5 * time.Second, DemoSecret: secret, DemoCustomers: demoCustomers()}}, false), dsn
}

// In Chromium with a virtual authenticator (the DevTools WebAuthn
// domain): a person adds a passkey, signs in with it, and approves an
// action whose rule asks for one; the signature is over exactly that
// call, those arguments and that verdict. The API is refused; a signature
// replayed on another action, or posted with other arguments, is refused;
// audit verify checks the kept signature and names the approval when the
// record is altered.
func TestBrowserPasskeysSignExactlyWhatWasDecided(t *testing.T) {
	a, dsn := passkeyApp(t)
	ann := a.staff(models.Approver, "ann@x.test", "Ann")
	// Passkeys belong to a host name: an IP address cannot be one.
	base := strings.Replace(a.srv.URL, "127.0.0.1", "localhost", 1)
	ctx := person(t, newBrowser(t))
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/login")); err != nil {
		t.Fatal(err)
	}
	var err error
	virtualAuthenticator(t, ctx)
	signInBrowser(t, ctx, base, "ann@x.test")
	addPasskey(t, ctx, base)
	if keys, _ := a.store.Passkeys(context.Background(), ann.ID); len(keys) != 1 || keys[0].Name != "Test key" || keys[0].RPID != "localhost" {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
		t.Fatalf("passkeys: %+v\n%s", keys, msg)
	}
	// Signed out, and in again with the passkey alone.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header form button`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=passkey-signin]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The sign-in page may still be settling when the button is first
	// seen (its node replaced under the click): a click that found no node
	// clicked nothing, and is made again.
	for try := 0; ; try++ {
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(`[data-testid=passkey-signin]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue], [data-testid=login-error], [data-testid=passkey-error]`)),
		)
		if err == nil || try == 2 || !strings.Contains(err.Error(), "Could not find node") {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if who, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=who]`))); !strings.Contains(who, "Ann") {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
		t.Fatalf("signed in with the passkey as %q: %s", who, msg)
	}

	// The API cannot approve an action that asks for a passkey.
	first, second := a.pendingRefund("the first"), a.pendingFor("cus_bob", "Bob", "refund $100 on order B2001 because it broke")
	tok, _ := a.accounts.CreateAPIToken(context.Background(), "ann@x.test", models.Actor{ID: "test"})
	if r := a.do("POST", "/api/v1/actions/"+first.ID+"/approve", tok, ""); r.Status != http.StatusForbidden ||
		!strings.Contains(r.Raw, "this approval needs a passkey signature: approve it in the back office") {
		t.Fatalf("the API approves a passkey action: %d %s", r.Status, r.Raw)
	}
	// Approve with the passkey on the page.
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/actions/"+first.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=passkey-needed]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if label, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=approve]`))); label != "Approve with passkey" {
		t.Fatalf("the button says %q", label)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=approve]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=flash]`))); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, first.ID, models.CallSucceeded)
	approvals, _ := a.store.Approvals(context.Background(), first.ID)
	if len(approvals) != 1 || approvals[0].Passkey == "" {
		t.Fatalf("the approval keeps no signature: %+v", approvals)
	}
	if r := a.do("GET", "/api/v1/actions/"+first.ID, tok, ""); !strings.Contains(r.Raw, `"passkey":true`) {
		t.Fatalf("the API does not say the approval is signed: %s", r.Raw)
	}
	if _, page := a.signIn("ann@x.test").get("/actions/" + first.ID); !strings.Contains(between(page, `data-testid="approvals"`, "</ul>"), "signed with a passkey") {
		t.Fatalf("the decided action does not say the verdict was signed with a passkey: %s", between(page, `data-testid="approvals"`, "</ul>"))
	}
	var sig models.PasskeySignature
	_ = json.Unmarshal([]byte(approvals[0].Passkey), &sig)
	if sig.CallID != first.ID || sig.ArgsHash != approvals[0].ArgsHash || sig.Verdict != "approve" {
		t.Fatalf("the signature: %+v", sig)
	}
	// The call's evidence carries the assertion and the passkey's public
	// key: it checks offline, and a credential swapped for another is named.
	ev := a.do("GET", "/api/v1/calls/"+first.ID+"/evidence", tok, "")
	var bundle receipts.Bundle
	if err := json.Unmarshal([]byte(ev.Raw), &bundle); ev.Status != 200 || err != nil || len(bundle.Passkeys) != 1 {
		t.Fatalf("evidence: %d %s", ev.Status, ev.Raw)
	}
	if p, problems := receipts.Check(&bundle, nil); len(problems) != 0 || len(p.Envelope.Approvals) != 1 || p.Envelope.Approvals[0].Passkey == nil {
		t.Fatalf("the evidence of a passkey approval: %v %+v", problems, p.Envelope.Approvals)
	}
	bundle.Passkeys[0].Credential = strings.Replace(bundle.Passkeys[0].Credential, `"publicKey":"p`, `"publicKey":"q`, 1)
	if _, problems := receipts.Check(&bundle, nil); !strings.Contains(strings.Join(problems, "\n"), "passkey of Ann") {
		t.Fatalf("an altered passkey in the bundle: %v (credential %s)", problems, bundle.Passkeys[0].Credential)
	}

	// A second signature, captured in the page instead of sent.
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/actions/"+second.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=approve]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`HTMLFormElement.prototype.submit = function () { window.captured = Object.fromEntries(new FormData(this)); }; true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=approve]`))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!!window.captured`)); err != nil {
		t.Fatal(err)
	}
	captured, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`window.captured`))
	if err != nil || captured["passkey_assertion"] == "" {
		t.Fatalf("captured: %v %v", captured, err)
	}
	annB := a.signIn("ann@x.test")
	post := func(id string, extra url.Values) (int, string) {
		form := url.Values{"csrf": {annB.csrf}}
		for k, v := range captured {
			if k != "csrf" {
				form.Set(k, v)
			}
		}
		for k, v := range extra {
			form[k] = v
		}
		res, body := annB.post("/actions/"+id+"/approve", form)
		return res.StatusCode, body
	}
	// The first action's signature replayed onto the second is refused.
	replayed := url.Values{"passkey_assertion": {sig.Assertion}}
	if code, body := post(second.ID, replayed); code != http.StatusForbidden || !strings.Contains(body, "not over this decision") {
		t.Fatalf("a replayed signature: %d %.300s", code, between(body, `role="alert"`, "</p>"))
	}
	// The second's signature, posted with other arguments, is refused.
	if code, body := post(second.ID, url.Values{"edit": {"1"}, "arg.order_id": {"B2001"}, "arg.amount": {"99"}}); code != http.StatusForbidden ||
		!strings.Contains(body, "not over this decision") {
		t.Fatalf("a signature over other arguments: %d %.300s", code, between(body, `role="alert"`, "</p>"))
	}
	if c, _ := a.store.ToolCall(context.Background(), second.ID); c.Status != models.CallPending {
		t.Fatalf("a refused signature decided: %s", c.Status)
	}
	// As signed, it goes through; sent again, it is refused.
	if code, _ := post(second.ID, nil); code != http.StatusSeeOther {
		t.Fatalf("the signature as made: %d", code)
	}
	waitStatus(t, a, second.ID, models.CallSucceeded)
	if code, _ := post(second.ID, nil); code == http.StatusSeeOther {
		t.Fatal("the same signature approved twice")
	}

	// A rejection on the page is signed too.
	third := a.pendingFor("cus_bob", "Bob", "refund $120 on order B2001 because it broke")
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/actions/"+third.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=reject-reason]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
		t.Fatal(err)
	}
	if label, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=reject]`))); label != "Reject with passkey" {
		t.Fatalf("the reject button says %q", label)
	}
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=reject-reason]`), "not this one"),
		chromedp.Click(chromedp.CSS(`[data-testid=reject]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=flash]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, a, third.ID, models.CallRejected)
	if got, _ := a.store.Approvals(context.Background(), third.ID); len(got) != 1 || got[0].Verdict != "reject" || got[0].Passkey == "" {
		t.Fatalf("the rejection keeps no signature: %+v", got)
	}

	// audit verify checks the three signatures; altered, it names the approval.
	rep, err := audit.VerifyPasskeys(context.Background(), a.store)
	if err != nil || rep.Signed != 3 || len(rep.Failures) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	storetest.Tamper(t, dsn, fmt.Sprintf(`UPDATE approvals SET args_hash = '%s' WHERE id = %d`, strings.Repeat("0", 64), approvals[0].ID))
	rep, _ = audit.VerifyPasskeys(context.Background(), a.store)
	if len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "call "+first.ID) {
		t.Fatalf("an altered record: %+v", rep)
	}

	// The last way to sign in cannot be removed: with no password, Ann's
	// only passkey stays.
	keys, _ := a.store.Passkeys(context.Background(), ann.ID)
	storetest.Tamper(t, dsn, fmt.Sprintf(`UPDATE staffs SET password_hash = '' WHERE id = '%s'`, ann.ID))
	res, body := annB.post("/account/passkeys/"+keys[0].ID+"/remove", url.Values{"csrf": {annB.csrf}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "last way to sign in") {
		t.Fatalf("removing the last credential: %d %.300s", res.StatusCode, between(body, `role="alert"`, "</p>"))
	}
	if left, _ := a.store.Passkeys(context.Background(), ann.ID); len(left) != 1 {
		t.Fatal("the last passkey was removed")
	}
	// A countersigned reset clears the passkeys too.
	ada := a.apiToken(models.Admin, "ada@x.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	r := a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"reset","email":"ann@x.test"}`)
	a.do("POST", "/api/v1/staff/changes/"+r.Body["change"].(map[string]any)["id"].(string)+"/approve", bob, "")
	if left, _ := a.store.Passkeys(context.Background(), ann.ID); len(left) != 0 {
		t.Fatalf("a reset kept %d passkeys", len(left))
	}
	// Their records stay: what they signed still checks out (but the
	// approval altered above).
	if rep, _ := audit.VerifyPasskeys(context.Background(), a.store); rep.Signed != 3 || len(rep.Failures) != 1 {
		t.Fatalf("after the reset: %+v", rep)
	}
	_ = accounts.HostActor
}

func waitStatus(t *testing.T, a *app, id string, want models.CallStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := a.store.ToolCall(context.Background(), id); err == nil && c.Status == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, _ := a.store.ToolCall(context.Background(), id)
	t.Fatalf("%s is %s, not %s", id, c.Status, want)
}

// pendingFor starts a run whose message asks for a refund that waits.
func (a *app) pendingFor(customer, name, message string) *models.ToolCall {
	a.t.Helper()
	st, err := a.runner.StartRun(context.Background(), runloop.StartRequest{CustomerID: customer, CustomerName: name, Message: message})
	if err != nil {
		a.t.Fatal(err)
	}
	<-st.Done
	calls, _ := a.store.RunCalls(context.Background(), st.Run.ID)
	for i := range calls {
		if calls[i].Status == models.CallPending {
			return &calls[i]
		}
	}
	a.t.Fatal("no pending call")
	return nil
}

// virtualAuthenticator gives the browser tab a passkey authenticator that
// says yes (the DevTools WebAuthn domain).
func virtualAuthenticator(t *testing.T, ctx context.Context) {
	t.Helper()
	enable := false
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{EnableUI: &enable}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{Options: &webauthn.VirtualAuthenticatorOptions{
		Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21, Transport: webauthn.AuthenticatorTransportInternal,
		HasResidentKey: true, HasUserVerification: true, IsUserVerified: true, AutomaticPresenceSimulation: true}}); err != nil {
		t.Fatal(err)
	}
}

// addPasskey adds a passkey on /account, signed in already.
func addPasskey(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/account"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=passkey-name]`), "Test key"),
		chromedp.Click(chromedp.CSS(`[data-testid=add-passkey]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=passkeys], [data-testid=passkey-error], [data-testid=flash-error]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
}

// With --sign-with-passkey, an admin's approval of a staff change or a
// policy version is signed with their passkey on the page; the API cannot
// give one; audit verify checks them.
func TestBrowserAdminsSignChangesWithPasskeys(t *testing.T) {
	a, _ := passkeyAppWith(t, true)
	a.staff(models.Admin, "ada@x.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	carol := a.apiToken(models.Admin, "carol@x.test", "Carol")
	base := strings.Replace(a.srv.URL, "127.0.0.1", "localhost", 1)
	ctx := person(t, newBrowser(t))
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/login")); err != nil {
		t.Fatal(err)
	}
	virtualAuthenticator(t, ctx)
	signInBrowser(t, ctx, base, "ada@x.test")
	addPasskey(t, ctx, base)

	r := a.do("POST", "/api/v1/staff/changes", bob, `{"kind":"add","email":"nia@x.test","role":"approver"}`)
	change := r.Body["change"].(map[string]any)["id"].(string)
	if r := a.do("POST", "/api/v1/staff/changes/"+change+"/approve", carol, ""); r.Status != http.StatusForbidden ||
		!strings.Contains(r.Raw, "needs a passkey signature") {
		t.Fatalf("the API approves a change unsigned: %d %s", r.Status, r.Raw)
	}
	err := chromedp.Do(ctx, chromedp.Navigate(base+"/staff"), chromedp.WaitVisible(chromedp.CSS(`[data-change]`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-change] button.primary`)), chromedp.WaitVisible(chromedp.CSS(`.flash`))); err != nil {
		t.Fatal(err)
	}
	if ch, _ := a.store.StaffChange(context.Background(), change); ch.Status != models.ChangeDone {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.flash`)))
		t.Fatalf("the change is %s: %s", ch.Status, msg)
	}

	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	r = a.do("POST", "/api/v1/policy/versions", bob, proposeBody(raised, "signed"))
	id := fmt.Sprint(versionOf(t, r)["id"])
	if r := a.do("POST", "/api/v1/policy/versions/"+id+"/approve", carol, ""); r.Status != http.StatusForbidden {
		t.Fatalf("the API approves a version unsigned: %d %s", r.Status, r.Raw)
	}
	err = chromedp.Do(ctx, chromedp.Navigate(base+"/policy/versions/"+id), chromedp.WaitVisible(chromedp.CSS(`[data-testid=approve-version]`)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=approve-version]`))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.gate.Policy().Version() != versionOf(t, r)["hash"] && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if a.gate.Policy().Version() != versionOf(t, r)["hash"] {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
		t.Fatalf("the version is not in force: %.500s", msg)
	}
	rep, err := audit.VerifyPasskeys(context.Background(), a.store)
	if err != nil || rep.Signed != 2 || len(rep.Failures) != 0 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// An enrollment link registers a passkey instead of a password: the new
// person is signed in, and the link works no more.
func TestBrowserEnrollsWithAPasskey(t *testing.T) {
	a, _ := passkeyApp(t)
	ada := a.apiToken(models.Admin, "ada@x.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	r := a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"add","email":"nia@x.test","role":"approver","name":"Nia"}`)
	a.do("POST", "/api/v1/staff/changes/"+r.Body["change"].(map[string]any)["id"].(string)+"/approve", bob, "")
	link, _, err := a.accounts.EnrollLink(context.Background(), "nia@x.test")
	if err != nil {
		t.Fatal(err)
	}
	base := strings.Replace(a.srv.URL, "127.0.0.1", "localhost", 1)
	ctx := person(t, newBrowser(t))
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/login")); err != nil {
		t.Fatal(err)
	}
	virtualAuthenticator(t, ctx)
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+link),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=enroll-passkey]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete"`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=enroll-passkey]`))); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue], [data-testid=passkey-error], [data-testid=enroll-error]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if who, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=who]`))); !strings.Contains(who, "Nia") {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
		t.Fatalf("enrolled as %q: %s", who, msg)
	}
	st, _ := a.store.StaffByEmail(context.Background(), "nia@x.test")
	if keys, _ := a.store.Passkeys(context.Background(), st.ID); len(keys) != 1 || st.PasswordHash != "" {
		t.Fatalf("keys %d, password %q", len(keys), st.PasswordHash)
	}
	if res, _ := a.browser().get(link); res.StatusCode != http.StatusNotFound {
		t.Fatalf("the link still works: %d", res.StatusCode)
	}
}

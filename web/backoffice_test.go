package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/web"
)

const password = "correct horse battery staple"

// browser is one person's cookie jar against the test server.
type browser struct {
	t      *testing.T
	a      *app
	client *http.Client
	csrf   string
}

func (a *app) staff(role models.StaffRole, email, name string) *models.Staff {
	a.t.Helper()
	st, err := a.accounts.AddStaff(context.Background(), email, name, role, password, models.Actor{ID: "test"})
	if err != nil {
		a.t.Fatal(err)
	}
	return st
}

func (a *app) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: a.t, a: a, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (a *app) signIn(email string) *browser {
	a.t.Helper()
	b := a.browser()
	res, body := b.post("/login", url.Values{"email": {email}, "password": {password}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/queue" {
		a.t.Fatalf("sign in %s: %d %s", email, res.StatusCode, body)
	}
	_, page := b.get("/queue")
	b.csrf = csrfFrom(page)
	if b.csrf == "" {
		a.t.Fatalf("no csrf token on the queue page")
	}
	return b
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfFrom(page string) string {
	if m := csrfRe.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	res, err := b.client.Get(b.a.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	res, err := b.client.PostForm(b.a.srv.URL+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// pendingRefund starts a run whose $900 refund waits for approval; the
// reason is text the model chose, shown to staff.
func (a *app) pendingRefund(reason string) *models.ToolCall {
	a.t.Helper()
	st, err := a.runner.StartRun(context.Background(), runloop.StartRequest{CustomerID: "cus_alice", CustomerName: "Alice",
		Message: "refund $900 on order A1002 because " + reason})
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

func TestEveryRouteChecksTheRole(t *testing.T) {
	a := newApp(t)
	annID := a.staff(models.Approver, "ann@x.test", "Ann").ID
	a.staff(models.Supervisor, "sam@x.test", "Sam")
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	a.staff(models.Admin, "ada@x.test", "Ada")
	action := a.pendingRefund("it broke")
	browsers := map[string]*browser{"anonymous": a.browser(), "approver": a.signIn("ann@x.test"), "supervisor": a.signIn("sam@x.test"),
		"auditor": a.signIn("aud@x.test"), "admin": a.signIn("ada@x.test")}
	pages := []string{"/queue", "/actions/" + action.ID, "/runs", "/runs/" + action.RunID, "/audit", "/audit/export.csv", "/audit/export.jsonl", "/audit/chain.jsonl", "/policy", "/tools"}
	for who, b := range browsers {
		for _, p := range pages {
			res, _ := b.get(p)
			want := http.StatusOK
			if who == "anonymous" {
				want = http.StatusSeeOther
			}
			if res.StatusCode != want {
				t.Errorf("%s GET %s: %d, want %d", who, p, res.StatusCode, want)
			}
		}
		res, _ := b.get("/staff")
		want := map[string]int{"anonymous": 303, "admin": 200}[who]
		if want == 0 {
			want = 403
		}
		if res.StatusCode != want {
			t.Errorf("%s GET /staff: %d, want %d", who, res.StatusCode, want)
		}
	}
	// Posts: who may decide, who may administer.
	posts := []struct {
		path    string
		form    url.Values
		allowed map[string]bool
	}{
		{"/actions/" + action.ID + "/reject", url.Values{"reason": {"role matrix"}}, map[string]bool{"approver": true, "supervisor": true, "admin": true}},
		{"/actions/" + action.ID + "/approve", url.Values{}, map[string]bool{"approver": true, "supervisor": true, "admin": true}},
		{"/runs/" + action.RunID + "/retry", url.Values{}, map[string]bool{"approver": true, "supervisor": true, "admin": true}},
		{"/runs/" + action.RunID + "/close", url.Values{}, map[string]bool{"approver": true, "supervisor": true, "admin": true}},
		{"/staff", url.Values{"email": {"new@x.test"}, "name": {"New"}, "role": {"auditor"}, "password": {password}}, map[string]bool{"admin": true}},
		{"/staff/" + annID + "/role", url.Values{"role": {"admin"}}, map[string]bool{"admin": true}},
		{"/staff/" + annID + "/disabled", url.Values{"disabled": {"true"}}, map[string]bool{"admin": true}},
		{"/staff/" + annID + "/tokens/revoke", url.Values{}, map[string]bool{"admin": true}},
	}
	for _, p := range posts {
		for _, who := range []string{"anonymous", "auditor", "approver", "supervisor", "admin"} {
			if p.allowed[who] {
				continue // tried last, once
			}
			b := browsers[who]
			form := url.Values{"csrf": {b.csrf}}
			for k, v := range p.form {
				form[k] = v
			}
			res, body := b.post(p.path, form)
			want := http.StatusForbidden
			if who == "anonymous" {
				want = http.StatusUnauthorized
			}
			if res.StatusCode != want {
				t.Errorf("%s POST %s: %d, want %d: %.200s", who, p.path, res.StatusCode, want, body)
			}
		}
	}
	if c, _ := a.store.ToolCall(context.Background(), action.ID); c.Status != models.CallPending {
		t.Fatalf("a refused post changed the action: %s", c.Status)
	}
	b := browsers["admin"]
	if res, body := b.post("/staff", url.Values{"csrf": {b.csrf}, "email": {"new@x.test"}, "name": {"New"}, "role": {"auditor"}, "password": {password}}); res.StatusCode != 303 {
		t.Fatalf("admin adds staff: %d %s", res.StatusCode, body)
	}
}

func TestPostWithoutCSRFTokenIsRefused(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	action := a.pendingRefund("it broke")
	b := a.signIn("ann@x.test")
	for _, form := range []url.Values{{}, {"csrf": {"forged"}}} {
		res, body := b.post("/actions/"+action.ID+"/approve", form)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "did not come from Countersign") {
			t.Fatalf("approve with csrf %v: %d %.300s", form, res.StatusCode, body)
		}
	}
	if c, _ := a.store.ToolCall(context.Background(), action.ID); c.Status != models.CallPending {
		t.Fatal("a forged post approved the action")
	}
	res, _ := b.post("/actions/"+action.ID+"/approve", url.Values{"csrf": {b.csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("with the token: %d", res.StatusCode)
	}
}

func TestArgumentsAreShownEscaped(t *testing.T) {
	a := newApp(t)
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	action := a.pendingRefund(`<script>alert("x")</script> & 'quotes'`)
	b := a.signIn("aud@x.test")
	for _, p := range []string{"/actions/" + action.ID, "/audit", "/runs/" + action.RunID} {
		_, body := b.get(p)
		if strings.Contains(body, `<script>alert`) {
			t.Fatalf("%s shows the script unescaped", p)
		}
		if !strings.Contains(body, `&lt;script&gt;alert(`) {
			t.Fatalf("%s does not show the text at all:\n%.2000s", p, body)
		}
	}
	res, _ := b.get("/actions/" + action.ID)
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP %q", csp)
	}
	if res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatal("no nosniff")
	}
}

func TestDoubleApproveThroughTwoSessions(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Approver, "ben@x.test", "Ben")
	action := a.pendingRefund("it broke")
	ann, ben := a.signIn("ann@x.test"), a.signIn("ben@x.test")
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, b := range []*browser{ann, ben} {
		wg.Add(1)
		go func(i int, b *browser) {
			defer wg.Done()
			res, body := b.post("/actions/"+action.ID+"/approve", url.Values{"csrf": {b.csrf}})
			results[i] = res.Status + " " + body
		}(i, b)
	}
	wg.Wait()
	ok, conflict := 0, 0
	for _, r := range results {
		switch {
		case strings.HasPrefix(r, "303"):
			ok++
		case strings.HasPrefix(r, "409") && strings.Contains(r, "already decided"):
			conflict++
		}
	}
	if ok != 1 || conflict != 1 {
		t.Fatalf("results %.300q", results)
	}
	refunds, _ := shop.On(a.store).OrderRefunds(context.Background(), "A1002")
	if len(refunds) != 1 {
		t.Fatalf("%d refunds", len(refunds))
	}
}

func TestEditAndApproveInTheBrowserForm(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	action := a.pendingRefund("it broke")
	b := a.signIn("ann@x.test")
	// An invalid edit re-renders with the field's error and keeps the input.
	res, body := b.post("/actions/"+action.ID+"/approve", url.Values{"csrf": {b.csrf}, "edit": {"1"}, "arg.amount": {"-3"}, "arg.order_id": {"A1002"}})
	if res.StatusCode != 400 || !strings.Contains(body, "must be &gt; 0") || !strings.Contains(body, `value="-3"`) {
		t.Fatalf("invalid edit: %d %.3000s", res.StatusCode, body)
	}
	res, _ = b.post("/actions/"+action.ID+"/approve", url.Values{"csrf": {b.csrf}, "edit": {"1"}, "arg.amount": {"450"}, "arg.order_id": {"A1002"}, "arg.reason": {"it broke"}})
	if res.StatusCode != 303 {
		t.Fatalf("edit: %d", res.StatusCode)
	}
	_, page := b.get("/actions/" + action.ID)
	if !strings.Contains(page, `&#34;amount&#34;: 450`) || !strings.Contains(page, `&#34;amount&#34;: 900`) || !strings.Contains(page, "with edited arguments") ||
		strings.Contains(page, "arguments :") {
		t.Fatalf("the page does not show original and edited arguments:\n%.3000s", page)
	}
	// What changed is listed by field: the amount, not the untouched order.
	changes := between(page, `data-testid="arg-changes"`, `</table>`)
	if !strings.Contains(changes, `data-field="amount"`) || !strings.Contains(changes, "<code>900</code>") || !strings.Contains(changes, "<code>450</code>") ||
		strings.Contains(changes, `data-field="order_id"`) || strings.Contains(changes, `data-field="reason"`) {
		t.Fatalf("changes: %s", changes)
	}
	if d := between(page, `data-testid="edit-decision"`, `</p>`); !strings.Contains(d, "needs_approval · refund-needs-approval: Refund of $450.00") {
		t.Fatalf("the policy's word on the edit: %q", d)
	}
}

func TestStaffAPI(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	action := a.pendingRefund("it broke")
	annTok, _ := a.accounts.CreateAPIToken(context.Background(), "ann@x.test", models.Actor{})
	audTok, _ := a.accounts.CreateAPIToken(context.Background(), "aud@x.test", models.Actor{})

	if r := a.do("GET", "/api/v1/actions?status=pending", "", ""); r.Status != 401 || errCode(r) != "unauthorized" {
		t.Fatalf("no token: %d %s", r.Status, r.Raw)
	}
	r := a.do("GET", "/api/v1/actions?status=pending", audTok, "")
	list, _ := r.Body["actions"].([]any)
	if r.Status != 200 || len(list) != 1 || list[0].(map[string]any)["id"] != action.ID {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
	got := list[0].(map[string]any)
	for _, k := range []string{"id", "run_id", "tool", "args", "status", "reason", "required_approvals", "approvals"} {
		if _, ok := got[k]; !ok {
			t.Errorf("action lacks %s", k)
		}
	}
	if r := a.do("POST", "/api/v1/actions/"+action.ID+"/approve", audTok, `{}`); r.Status != 403 {
		t.Fatalf("auditor approves: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/actions/"+action.ID+"/approve", annTok, `{"args":{"order_id":"A1002","amount":-1}}`); r.Status != 400 || !strings.Contains(r.Body["error"].(map[string]any)["message"].(string), "amount: must be > 0") {
		t.Fatalf("invalid edit: %d %s", r.Status, r.Raw)
	}
	r = a.do("POST", "/api/v1/actions/"+action.ID+"/approve", annTok, `{"note":"ok","args":{"order_id":"A1002","amount":300}}`)
	if r.Status != 200 || r.Body["final"] != true || r.Body["action"].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/actions/"+action.ID+"/reject", annTok, `{"reason":"late"}`); r.Status != 409 {
		t.Fatalf("reject after approve: %d %s", r.Status, r.Raw)
	}
	if r := a.do("GET", "/api/v1/actions/nope", annTok, ""); r.Status != 404 {
		t.Fatalf("unknown id: %d", r.Status)
	}
	var o struct{}
	_ = json.Unmarshal([]byte(r.Raw), &o)
}

func TestDisablingEndsSessionsAtOnce(t *testing.T) {
	a := newApp(t)
	ann := a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Admin, "ada@x.test", "Ada")
	annB, adaB := a.signIn("ann@x.test"), a.signIn("ada@x.test")
	if res, _ := adaB.post("/staff/"+ann.ID+"/disabled", url.Values{"csrf": {adaB.csrf}, "disabled": {"true"}}); res.StatusCode != 303 {
		t.Fatalf("disable: %d", res.StatusCode)
	}
	if res, _ := annB.get("/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("disabled account still in: %d", res.StatusCode)
	}
	res, body := a.browser().post("/login", url.Values{"email": {"ann@x.test"}, "password": {password}})
	if res.StatusCode != 403 || !strings.Contains(body, "disabled") {
		t.Fatalf("disabled sign-in: %d", res.StatusCode)
	}
}

func TestLogoutEndsTheSession(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	b := a.signIn("ann@x.test")
	u, _ := url.Parse(a.srv.URL)
	cookies := b.client.Jar.Cookies(u)
	if res, _ := b.post("/logout", url.Values{"csrf": {b.csrf}}); res.StatusCode != 303 {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	// The old cookie, replayed, opens nothing.
	replay := a.browser()
	replay.client.Jar.SetCookies(u, cookies)
	if res, _ := replay.get("/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("replayed cookie: %d", res.StatusCode)
	}
	for _, c := range cookies {
		if c.Name == "cs_session" && (c.Value == "" || len(c.Value) < 40) {
			t.Fatalf("weak session id %q", c.Value)
		}
	}
}

func TestLoginIsRateLimited(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	b := a.browser()
	var last int
	for i := 0; i < 7; i++ {
		res, _ := b.post("/login", url.Values{"email": {"ann@x.test"}, "password": {"wrong password!"}})
		last = res.StatusCode
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("7th wrong attempt: %d", last)
	}
}

func TestAuditFiltersPagesAndExports(t *testing.T) {
	a := newApp(t)
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	a.staff(models.Approver, "ann@x.test", "Ann")
	ctx := context.Background()
	// 60 reads and one refund decided by Ann.
	for i := 0; i < 60; i++ {
		st, err := a.runner.StartRun(ctx, runloop.StartRequest{CustomerID: "cus_bob", CustomerName: "Bob", Message: "where is B2001?"})
		if err != nil {
			t.Fatal(err)
		}
		<-st.Done
	}
	action := a.pendingRefund("it broke")
	ann, _ := a.store.StaffByEmail(ctx, "ann@x.test")
	if _, err := a.gate.Approve(ctx, action.ID, ann.Actor(), gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	b := a.signIn("aud@x.test")
	_, page := b.get("/audit")
	if n := strings.Count(page, `data-testid="audit-row"`); n != 50 {
		t.Fatalf("first page has %d rows", n)
	}
	// The chain is verified in the background; the next load shows it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(page, "audit chain intact") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		_, page = b.get("/audit")
	}
	if !strings.Contains(page, "audit chain intact") {
		t.Fatal("no chain status")
	}
	next := regexp.MustCompile(`href="(/audit\?[^"]*after=[^"]+)" data-testid="next-page"`).FindStringSubmatch(page)
	if next == nil {
		t.Fatal("no next page link")
	}
	_, page2 := b.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if n := strings.Count(page2, `data-testid="audit-row"`); n != 11 {
		t.Fatalf("second page has %d rows", n)
	}
	_, byStaff := b.get("/audit?staff=Ann")
	if n := strings.Count(byStaff, `data-testid="audit-row"`); n != 1 || !strings.Contains(byStaff, "Ann (approve)") {
		t.Fatalf("staff filter: %d rows", n)
	}
	_, byText := b.get("/audit?q=B2001&tool=get_order_status")
	if n := strings.Count(byText, `data-testid="audit-row"`); n != 50 {
		t.Fatalf("text filter: %d rows", n)
	}
	// Narrowed by a tool, the text search needs no warning; alone, it says
	// it reads every call.
	if strings.Contains(byText, `data-testid="text-search-hint"`) {
		t.Fatal("a narrowed text search shows the slow-search hint")
	}
	if _, alone := b.get("/audit?q=B2001"); !strings.Contains(alone, `data-testid="text-search-hint"`) {
		t.Fatal("a text search alone does not say it reads every call")
	}
	// A filter that cannot be read is said on the page, in words, with the
	// rest of the filter applied; an export refuses it.
	if res, page := b.get("/audit?decision=maybe&tool=issue_refund"); res.StatusCode != 200 || !strings.Contains(page, `Unknown decision &#34;maybe&#34;.`) ||
		strings.Count(page, `data-testid="audit-row"`) != 1 {
		t.Fatalf("bad decision: %d %s", res.StatusCode, between(page, `data-testid="filter-error"`, "</p>"))
	}
	if res, page := b.get("/audit?from=30/11/2026"); res.StatusCode != 200 || !strings.Contains(page, "is not a date: pick one in the calendar") {
		t.Fatalf("bad date: %d", res.StatusCode)
	}
	if res, _ := b.get("/audit/export.csv?from=yesterday"); res.StatusCode != 400 {
		t.Fatalf("an export with a bad date: %d", res.StatusCode)
	}
	res, csvBody := b.get("/audit/export.csv?tool=issue_refund")
	lines := strings.Split(strings.TrimSpace(csvBody), "\n")
	if res.Header.Get("Content-Type") != "text/csv; charset=utf-8" || len(lines) != 2 || !strings.Contains(lines[1], "Ann (approve)") {
		t.Fatalf("csv %q", csvBody)
	}
	_, jsonl := b.get("/audit/export.jsonl")
	rows := strings.Split(strings.TrimSpace(jsonl), "\n")
	if len(rows) != 61 {
		t.Fatalf("jsonl has %d rows", len(rows))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(rows[0]), &first); err != nil || first["tool"] != "issue_refund" || first["policy_version"] == "" {
		t.Fatalf("jsonl row %v %v", first, err)
	}
	if out, err := a.gate.Call(context.Background(), gate.CallRequest{RunID: a.run("cus_alice", "Alice"), CustomerID: "cus_alice", Channel: "test",
		Tool: "get_order_status", Args: []byte(`{"order_id":"A1001"}`)}); err != nil || out.Status != "succeeded" {
		t.Fatalf("a read: %+v %v", out, err)
	}
	_, all := b.get("/audit")
	_, only := b.get("/audit?only=decisions")
	if !strings.Contains(all, "<code>get_order_status</code>") || strings.Contains(only, "<code>get_order_status</code>") ||
		!strings.Contains(only, "<code>issue_refund</code>") {
		t.Fatal("decisions only should hide the allowed read and keep the refund")
	}
}

func TestSessionsEndAfterIdleAndAbsoluteTimeouts(t *testing.T) {
	// The clock is the store's before the app starts: its background jobs
	// read it from then on.
	store := openStore(t)
	var mu sync.Mutex
	now := time.Now().UTC()
	store.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if _, err := shop.On(store).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := demoAppOn(t, store, nil, false)
	a.staff(models.Approver, "ann@x.test", "Ann")
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	idle := a.signIn("ann@x.test")
	advance(a.accounts.IdleTimeout + time.Minute)
	if res, _ := idle.get("/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("idle session still open: %d", res.StatusCode)
	}

	busy := a.signIn("ann@x.test")
	for elapsed := time.Duration(0); elapsed < a.accounts.AbsoluteTimeout-time.Hour; elapsed += time.Hour {
		advance(time.Hour)
		if res, _ := busy.get("/queue"); res.StatusCode != http.StatusOK {
			t.Fatalf("active session ended after %s", elapsed+time.Hour)
		}
	}
	advance(2 * time.Hour)
	if res, _ := busy.get("/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("session older than the absolute timeout still open: %d", res.StatusCode)
	}
}

// between returns the part of s from the first start to the end after it.
func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, end); j >= 0 {
		return s[:j]
	}
	return s
}

// A text search that runs past its time budget stops with a message that
// says how to narrow it, instead of holding the page.
func TestAuditTextSearchStopsAtItsBudget(t *testing.T) {
	a := newAppWith(t, func(c *web.Config) { c.AuditSearchTimeout = time.Nanosecond })
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	a.pendingRefund("it broke")
	b := a.signIn("aud@x.test")
	res, page := b.get("/audit?q=A1002")
	if res.StatusCode != 200 || !strings.Contains(page, `data-testid="search-stopped"`) || strings.Contains(page, `data-testid="audit-row"`) {
		t.Fatalf("a search past its budget: %d\n%.3000s", res.StatusCode, page)
	}
	// Other filters have no budget.
	if _, page := b.get("/audit?tool=issue_refund"); strings.Contains(page, "search-stopped") || !strings.Contains(page, `data-testid="audit-row"`) {
		t.Fatalf("a filter without text:\n%.3000s", page)
	}
}

// An admin ends someone's staff API tokens from the staff page without
// disabling them: the tokens stop working, the person's session does not.
func TestAdminRevokesStaffTokens(t *testing.T) {
	a := newApp(t)
	ann := a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Admin, "ada@x.test", "Ada")
	tok, err := a.accounts.CreateAPIToken(context.Background(), "ann@x.test", models.Actor{})
	if err != nil {
		t.Fatal(err)
	}
	annBrowser := a.signIn("ann@x.test")
	admin := a.signIn("ada@x.test")
	_, page := admin.get("/staff")
	if !strings.Contains(page, `action="/staff/`+ann.ID+`/tokens/revoke"`) {
		t.Fatalf("the staff page offers no revoke for Ann's token:\n%.3000s", page)
	}
	if r := a.do("GET", "/api/v1/actions?status=pending", tok, ""); r.Status != 200 {
		t.Fatalf("token before: %d", r.Status)
	}
	res, _ := admin.post("/staff/"+ann.ID+"/tokens/revoke", url.Values{"csrf": {admin.csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if r := a.do("GET", "/api/v1/actions?status=pending", tok, ""); r.Status != http.StatusUnauthorized {
		t.Fatalf("token after: %d", r.Status)
	}
	if res, _ := annBrowser.get("/queue"); res.StatusCode != 200 {
		t.Fatalf("Ann's session ended too: %d", res.StatusCode)
	}
	if _, page := admin.get("/staff?done=tokens"); !strings.Contains(page, "API tokens were revoked") {
		t.Fatal("no confirmation")
	}
}

// An approval given by someone whose account was disabled since does not
// count: not for the gate, and not on the action page or in the staff API,
// which count with the same rule.
func TestADisabledApproversApprovalCountsNowhere(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	ann := a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Supervisor, "sue@x.test", "Sue")
	admin := a.staff(models.Admin, "ada@x.test", "Ada")
	run := models.NewID("run")
	if err := a.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_bob", CustomerName: "Bob", Channel: "test", Status: "active"})
	}); err != nil {
		t.Fatal(err)
	}
	out, err := a.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: "cus_bob", Channel: "test", Tool: "issue_refund",
		Args: []byte(`{"order_id":"B2001","amount":1200}`)})
	if err != nil || out.Status != models.CallPending {
		t.Fatalf("%+v %v", out, err)
	}
	if res, err := a.gate.Approve(ctx, out.CallID, ann.Actor(), gate.ApproveRequest{}); err != nil || res.Approvals != 1 {
		t.Fatalf("Ann: %+v %v", res, err)
	}
	if err := a.accounts.SetDisabled(ctx, ann.ID, true, admin.Actor()); err != nil {
		t.Fatal(err)
	}
	_, page := a.signIn("sue@x.test").get("/actions/" + out.CallID)
	if !strings.Contains(page, "0 of 2 so far") || !strings.Contains(page, `data-testid="approval-disabled"`) {
		t.Fatalf("the page still counts a disabled account's approval:\n%s", page)
	}
	tok, _ := a.accounts.CreateAPIToken(ctx, "sue@x.test", models.Actor{})
	r := a.do("GET", "/api/v1/actions/"+out.CallID, tok, "")
	if !strings.Contains(string(r.Raw), `"counts":false`) || strings.Contains(string(r.Raw), `"counts":true`) {
		t.Fatalf("the staff API still counts it: %s", r.Raw)
	}
}

// Browsers ask for /favicon.ico on every page: it is answered (no icon),
// not a 404 logged as a warning each time.
func TestFaviconIsAnswered(t *testing.T) {
	a := newApp(t)
	res, err := http.Get(a.srv.URL + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("/favicon.ico: %d", res.StatusCode)
	}
}

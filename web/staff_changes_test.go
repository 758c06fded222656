package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
)

// noLink fails when a response to an admin carries an enrollment link or
// anything like a password.
func noLink(t *testing.T, where, body string) {
	t.Helper()
	if strings.Contains(body, "enr_") || strings.Contains(body, "/enroll/") {
		t.Fatalf("%s shows an enrollment link to an admin: %.300s", where, body)
	}
}

// The attack of issue 38: one admin, alone, through every path (the page,
// the API, a second session, the host's command line), cannot end up
// holding two signatures: every account they propose, every role they
// raise, every account they enable or reset waits for another admin, and
// the account made never has a credential they know.
func TestOneAdminAloneCannotHoldTwoSignatures(t *testing.T) {
	a := newApp(t)
	mallory := a.staff(models.Admin, "mallory@x.test", "Mallory")
	carol := a.staff(models.Admin, "carol@x.test", "Carol")
	ann := a.staff(models.Approver, "ann@x.test", "Ann")
	tok, err := a.accounts.CreateAPIToken(context.Background(), mallory.Email, models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m1, m2 := a.signIn(mallory.Email), a.signIn(mallory.Email) // two sessions of one person

	// The page: an admin "A alt" with a password of Mallory's choosing.
	res, body := m1.post("/staff", url.Values{"csrf": {m1.csrf}, "email": {"alt@x.test"}, "name": {"A alt"}, "role": {"admin"}, "password": {password}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("propose: %d %.300s", res.StatusCode, body)
	}
	if _, err := a.store.StaffByEmail(context.Background(), "alt@x.test"); err == nil {
		t.Fatal("proposing an account made it at once")
	}
	_, page := m1.get("/staff?done=proposed")
	noLink(t, "/staff", page)
	if !strings.Contains(page, "You proposed it: another admin approves.") {
		t.Fatalf("the proposer is offered to approve: %.2000s", between(page, `id="changes"`, "Agents"))
	}
	chs, _, err := a.accounts.Changes(context.Background())
	if err != nil || len(chs) != 1 || chs[0].Status != models.ChangeProposed {
		t.Fatalf("changes: %v %+v", err, chs)
	}
	add := chs[0].ID
	for i, b := range []*browser{m1, m2} {
		res, body := b.post("/staff/changes/"+add+"/approve", url.Values{"csrf": {b.csrf}})
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "ou proposed this change") {
			t.Fatalf("session %d approves its own proposal: %d %.300s", i+1, res.StatusCode, body)
		}
	}
	// The API, with Mallory's token.
	if r := a.do("POST", "/api/v1/staff/changes/"+add+"/approve", tok, ""); r.Status != http.StatusForbidden {
		t.Fatalf("API approves its own proposal: %d %s", r.Status, r.Raw)
	}
	r := a.do("POST", "/api/v1/staff/changes", tok, `{"kind":"add","email":"sup@x.test","role":"supervisor","name":"A sup"}`)
	if r.Status != http.StatusCreated || r.Body["change"].(map[string]any)["status"] != "proposed" {
		t.Fatalf("API propose: %d %s", r.Status, r.Raw)
	}
	noLink(t, "the API", r.Raw)
	sup := r.Body["change"].(map[string]any)["id"].(string)
	if r := a.do("POST", "/api/v1/staff/changes/"+sup+"/approve", tok, ""); r.Status != http.StatusForbidden {
		t.Fatalf("API approves its own add: %d %s", r.Status, r.Raw)
	}
	// Raising someone Mallory controls, enabling one she disabled, taking
	// over Carol's account by a reset: each waits for another admin.
	raise := a.do("POST", "/api/v1/staff/changes", tok, `{"kind":"role","email":"ann@x.test","role":"admin"}`)
	if raise.Status != http.StatusCreated || raise.Body["change"].(map[string]any)["status"] != "proposed" {
		t.Fatalf("raise: %d %s", raise.Status, raise.Raw)
	}
	if res, body := m1.post("/staff/"+ann.ID+"/disabled", url.Values{"csrf": {m1.csrf}, "disabled": {"true"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable is at once: %d %.300s", res.StatusCode, body)
	}
	if st, _ := a.store.StaffByID(context.Background(), ann.ID); !st.Disabled {
		t.Fatal("disabling did not take effect at once")
	}
	if res, _ := m1.post("/staff/"+ann.ID+"/disabled", url.Values{"csrf": {m1.csrf}, "disabled": {"false"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("propose enabling: %d", res.StatusCode)
	}
	if st, _ := a.store.StaffByID(context.Background(), ann.ID); !st.Disabled {
		t.Fatal("enabling took effect without a second admin")
	}
	reset := a.do("POST", "/api/v1/staff/changes", tok, `{"kind":"reset","email":"carol@x.test"}`)
	if reset.Status != http.StatusCreated {
		t.Fatalf("reset: %d %s", reset.Status, reset.Raw)
	}
	resetID := reset.Body["change"].(map[string]any)["id"].(string)
	chs, _, _ = a.accounts.Changes(context.Background())
	for _, ch := range chs {
		if ch.Status != models.ChangeProposed {
			t.Fatalf("%s %s is %s with one admin's signature", ch.Kind, ch.Email, ch.Status)
		}
		for _, b := range []*browser{m1, m2} {
			if res, _ := b.post("/staff/changes/"+ch.ID+"/approve", url.Values{"csrf": {b.csrf}}); res.StatusCode != http.StatusForbidden {
				t.Fatalf("Mallory approves %s: %d", ch.Kind, res.StatusCode)
			}
		}
	}
	// The account concerned does not sign its own reset.
	carolTok, _ := a.accounts.CreateAPIToken(context.Background(), carol.Email, models.Actor{ID: "test"})
	if r := a.do("POST", "/api/v1/staff/changes/"+resetID+"/approve", carolTok, ""); r.Status != http.StatusForbidden ||
		!strings.Contains(r.Raw, "your own account") {
		t.Fatalf("the account concerned approves its reset: %d %s", r.Status, r.Raw)
	}
	// An approver, a supervisor, an auditor: no staff changes at all.
	for _, role := range []models.StaffRole{models.Approver, models.Supervisor, models.Auditor} {
		other := a.apiToken(role, string(role)+"-x@x.test", string(role))
		if r := a.do("POST", "/api/v1/staff/changes/"+add+"/approve", other, ""); r.Status != http.StatusForbidden {
			t.Fatalf("%s approves a staff change: %d %s", role, r.Status, r.Raw)
		}
		if r := a.do("POST", "/api/v1/staff/changes", other, `{"kind":"add","email":"z@x.test","role":"admin"}`); r.Status != http.StatusForbidden {
			t.Fatalf("%s proposes a staff change: %d %s", role, r.Status, r.Raw)
		}
	}

	// Carol approves the add: the account exists, with no password, and
	// nothing Mallory saw lets her in.
	cb := a.signIn(carol.Email)
	if res, body := cb.post("/staff/changes/"+add+"/approve", url.Values{"csrf": {cb.csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("Carol approves: %d %.300s", res.StatusCode, body)
	}
	alt, err := a.store.StaffByEmail(context.Background(), "alt@x.test")
	if err != nil || alt.Origin != models.OriginChange || alt.PasswordHash != "" {
		t.Fatalf("the added account: %v %+v", err, alt)
	}
	res, body = a.browser().post("/login", url.Values{"email": {"alt@x.test"}, "password": {password}})
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the proposer's password signs in to the new account: %d %.200s", res.StatusCode, body)
	}
	for _, p := range []string{"/staff", "/people/" + alt.ID, "/audit"} {
		_, page := m1.get(p)
		noLink(t, p, page)
	}
	r = a.do("GET", "/api/v1/staff/changes", tok, "")
	noLink(t, "GET /api/v1/staff/changes", r.Raw)
	// The host's command line makes accounts without a second admin (it
	// holds the database anyway): such an account is marked on /staff and
	// its lineage says so (every admin is told: agent/outbox's test).
	if _, err := a.accounts.AddStaff(context.Background(), "glass@x.test", "Break Glass", models.Admin, password, accounts.HostActor); err != nil {
		t.Fatal(err)
	}
	_, page = cb.get("/staff")
	if row := between(page, `data-staff="glass@x.test"`, "</tr>"); !strings.Contains(row, "made on the host") {
		t.Fatalf("a host-made account is not marked: %q", row)
	}
	// The lineage says who proposed and who approved, one click from the
	// account.
	_, page = m1.get("/people/" + alt.ID)
	lineage := between(page, `data-testid="lineage"`, "</ol>")
	if !strings.Contains(lineage, "proposed by") || !strings.Contains(lineage, "Mallory") || !strings.Contains(lineage, "Carol") {
		t.Fatalf("lineage: %q", lineage)
	}
}

// Lowering a role takes power away and is done at once; raising waits.
func TestLoweringIsAtOnceRaisingIsCountersigned(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@x.test", "Ada")
	sue := a.staff(models.Supervisor, "sue@x.test", "Sue")
	b := a.signIn("ada@x.test")
	if res, _ := b.post("/staff/"+sue.ID+"/role", url.Values{"csrf": {b.csrf}, "role": {"approver"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("lower: %d", res.StatusCode)
	}
	if st, _ := a.store.StaffByID(context.Background(), sue.ID); st.Role != models.Approver {
		t.Fatalf("lowering waited: %s", st.Role)
	}
	if res, _ := b.post("/staff/"+sue.ID+"/role", url.Values{"csrf": {b.csrf}, "role": {"supervisor"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("raise: %d", res.StatusCode)
	}
	if st, _ := a.store.StaffByID(context.Background(), sue.ID); st.Role != models.Approver {
		t.Fatalf("raising took effect alone: %s", st.Role)
	}
	_, page := b.get("/staff")
	if !strings.Contains(page, "make sue@x.test supervisor") {
		t.Fatalf("the waiting change is not on /staff")
	}
}

// A staff change through the API, from proposal to done, and a rejection.
func TestStaffChangesOverTheAPI(t *testing.T) {
	a := newApp(t)
	ada := a.apiToken(models.Admin, "ada@x.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	r := a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"add","email":"New@X.test","role":"approver","name":"Nia"}`)
	ch := r.Body["change"].(map[string]any)
	if r.Status != 201 || ch["status"] != "proposed" || ch["email"] != "new@x.test" || ch["kind"] != "add" || ch["role"] != "approver" || ch["proposed_by"] != "Ada" {
		t.Fatalf("propose: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"add","email":"new@x.test","role":"approver"}`); r.Status != http.StatusConflict {
		t.Fatalf("the same change twice: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"promote","email":"nope","role":"boss"}`); r.Status != 422 && r.Status != 400 {
		t.Fatalf("bad input: %d %s", r.Status, r.Raw)
	}
	r = a.do("POST", "/api/v1/staff/changes/"+ch["id"].(string)+"/approve", bob, "")
	if r.Status != 200 || r.Body["change"].(map[string]any)["status"] != "done" {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	noLink(t, "approve", r.Raw)
	if r := a.do("POST", "/api/v1/staff/changes/"+ch["id"].(string)+"/approve", bob, ""); r.Status != http.StatusConflict {
		t.Fatalf("approve twice: %d %s", r.Status, r.Raw)
	}
	r = a.do("POST", "/api/v1/staff/changes", bob, `{"kind":"role","email":"new@x.test","role":"admin"}`)
	id := r.Body["change"].(map[string]any)["id"].(string)
	r = a.do("POST", "/api/v1/staff/changes/"+id+"/reject", ada, `{"reason":"not yet"}`)
	if r.Status != 200 || r.Body["change"].(map[string]any)["status"] != "rejected" || r.Body["change"].(map[string]any)["reason"] != "not yet" {
		t.Fatalf("reject: %d %s", r.Status, r.Raw)
	}
	if st, _ := a.store.StaffByEmail(context.Background(), "new@x.test"); st.Role != models.Approver {
		t.Fatalf("a rejected change took effect: %s", st.Role)
	}
	r = a.do("GET", "/api/v1/staff/changes", ada, "")
	if r.Status != 200 || len(r.Body["changes"].([]any)) != 2 {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
}

// An enrollment link works once, for its owner, until it expires; the host
// prints one, audited as done there; a newer link voids the older.
func TestEnrollmentLinkWorksOnceAndExpires(t *testing.T) {
	var mu sync.Mutex
	now := time.Now().UTC()
	store := openStore(t)
	store.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if _, err := shop.On(store).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := demoAppOn(t, store, nil, false)
	ada := a.apiToken(models.Admin, "ada@x.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	r := a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"add","email":"nia@x.test","role":"approver","name":"Nia"}`)
	a.do("POST", "/api/v1/staff/changes/"+r.Body["change"].(map[string]any)["id"].(string)+"/approve", bob, "")

	ctx := context.Background()
	first, _, err := a.accounts.EnrollLink(ctx, "nia@x.test")
	if err != nil {
		t.Fatal(err)
	}
	link, expires, err := a.accounts.EnrollLink(ctx, "nia@x.test")
	if d := expires.Sub(now) - models.EnrollmentTTL; err != nil || d < -time.Second || d > time.Second {
		t.Fatalf("link: %v %v", err, expires)
	}
	b := a.browser()
	if res, page := b.get(first); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "newer one was made") {
		t.Fatalf("an older link still works: %d", res.StatusCode)
	}
	res, page := b.get(link)
	if res.StatusCode != 200 || !strings.Contains(page, "nia@x.test") || res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Referrer-Policy") != "same-origin" {
		t.Fatalf("the link's page: %d %v", res.StatusCode, res.Header)
	}
	// Opened at an IP address, where browsers make no passkeys, the page
	// offers the password alone and says why.
	if !strings.Contains(page, `data-testid="enroll-no-passkey"`) || strings.Contains(page, `data-testid="enroll-passkey"`) {
		t.Fatalf("at an IP address, the link's page offers a passkey:\n%s", page)
	}
	if res, page := b.post(link, url.Values{"password": {"a long password 1"}, "again": {"a long password 2"}}); res.StatusCode != 422 || !strings.Contains(page, "differ") {
		t.Fatalf("mismatch: %d", res.StatusCode)
	}
	if res, _ := b.post(link, url.Values{"password": {"short"}, "again": {"short"}}); res.StatusCode != 422 {
		t.Fatalf("short: %d", res.StatusCode)
	}
	res, _ = b.post(link, url.Values{"password": {"nia's own long password"}, "again": {"nia's own long password"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/queue" {
		t.Fatalf("enroll: %d", res.StatusCode)
	}
	if res, _ := b.get("/queue"); res.StatusCode != 200 {
		t.Fatalf("signed in after enrolling: %d", res.StatusCode)
	}
	if res, _ := a.browser().post(link, url.Values{"password": {"another long password"}, "again": {"another long password"}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("the link worked twice: %d", res.StatusCode)
	}
	elsewhere := a.browser()
	if res, _ := elsewhere.post("/login", url.Values{"email": {"nia@x.test"}, "password": {"nia's own long password"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in with the password set: %d", res.StatusCode)
	}
	// A password set again through a new link signs out every other
	// session of the account (an old password's, a stolen one); the person
	// who spent the link is signed in.
	again, _, err := a.accounts.EnrollLink(ctx, "nia@x.test")
	if err != nil {
		t.Fatal(err)
	}
	fresh := a.browser()
	if res, _ := fresh.post(again, url.Values{"password": {"nia's newer long password"}, "again": {"nia's newer long password"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("enroll again: %d", res.StatusCode)
	}
	for name, br := range map[string]*browser{"the first": b, "another": elsewhere} {
		if res, _ := br.get("/queue"); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s session is still signed in after the password was set through a link: %d", name, res.StatusCode)
		}
	}
	if res, _ := fresh.get("/queue"); res.StatusCode != 200 {
		t.Fatalf("the person who set it is not signed in: %d", res.StatusCode)
	}
	// A reset, countersigned, ends Nia's sessions; a link past 72 hours
	// does not work.
	r = a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"reset","email":"nia@x.test"}`)
	a.do("POST", "/api/v1/staff/changes/"+r.Body["change"].(map[string]any)["id"].(string)+"/approve", bob, "")
	if res, _ := fresh.get("/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a reset left the session open: %d", res.StatusCode)
	}
	link, _, _ = a.accounts.EnrollLink(ctx, "nia@x.test")
	mu.Lock()
	now = now.Add(models.EnrollmentTTL + time.Minute)
	mu.Unlock()
	if res, page := a.browser().get(link); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "expired") {
		t.Fatalf("an expired link: %d", res.StatusCode)
	}
	// The audit says the host made the links, and never holds one.
	host := 0
	err = a.store.EachAuditEvent(ctx, func(ev *models.AuditEvent) error {
		if strings.Contains(ev.Payload, "enr_") || strings.Contains(ev.Payload, "/enroll/") {
			t.Errorf("the audit log holds a link: %s", ev.Payload)
		}
		if ev.Kind == models.EventStaffEnrollLink && ev.Actor == accounts.HostActor.String() && strings.Contains(ev.Payload, `"sent":"host"`) {
			host++
		}
		return nil
	})
	if err != nil || host != 4 {
		t.Fatalf("links made on the host, as the audit says: %d %v", host, err)
	}
}

// Insights flag two accounts that co-sign while one was made able to sign
// on the other's proposal.
func TestInsightsFlagSignersOneProposedTheOther(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	ada := a.apiToken(models.Admin, "ada@x.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	aud := a.apiToken(models.Auditor, "aud@x.test", "Aud")
	r := a.do("POST", "/api/v1/staff/changes", ada, `{"kind":"add","email":"adam@x.test","role":"admin","name":"Adam"}`)
	a.do("POST", "/api/v1/staff/changes/"+r.Body["change"].(map[string]any)["id"].(string)+"/approve", bob, "")
	adam, err := a.accounts.CreateAPIToken(ctx, "adam@x.test", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if r := a.do("GET", "/api/v1/insights", aud, ""); r.Status != 200 || len(r.Body["vouched"].([]any)) != 0 {
		t.Fatalf("nothing co-signed yet: %d %s", r.Status, r.Raw)
	}
	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	r = a.do("POST", "/api/v1/policy/versions", ada, proposeBody(raised, "Adam will sign"))
	id := versionOf(t, r)["id"]
	if r := a.do("POST", fmt.Sprintf("/api/v1/policy/versions/%v/approve", id), adam, ""); r.Status != 200 {
		t.Fatalf("Adam approves: %d %s", r.Status, r.Raw)
	}
	r = a.do("GET", "/api/v1/insights", aud, "")
	vouched, _ := r.Body["vouched"].([]any)
	if r.Status != 200 || len(vouched) != 1 {
		t.Fatalf("vouched: %d %s", r.Status, r.Raw)
	}
	p := vouched[0].(map[string]any)
	if p["proposer"] != "Ada" || p["proposed"] != "Adam" || p["together"] != float64(1) {
		t.Fatalf("the pair: %v", p)
	}
	a.staff(models.Supervisor, "sue@x.test", "Sue")
	b := a.signIn("sue@x.test")
	_, page := b.get("/insights")
	if got := between(page, `data-testid="vouched"`, "</ul>"); !strings.Contains(got, "Adam") || !strings.Contains(got, "Ada") {
		t.Fatalf("the insights page: %q", got)
	}
}

// An admin sets an agent's own limits on /staff; bad numbers are refused
// with words; an approver cannot.
func TestAgentLimitsOnTheStaffPage(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@x.test", "Ada")
	a.staff(models.Approver, "ann@x.test", "Ann")
	if _, _, err := a.accounts.AddAgent(context.Background(), "reader-bot", models.Actor{ID: "test"}); err != nil {
		t.Fatal(err)
	}
	ada, ann := a.signIn("ada@x.test"), a.signIn("ann@x.test")
	if res, _ := ann.post("/staff/agents/reader-bot/limits", url.Values{"csrf": {ann.csrf}, "calls_per_second": {"500"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("an approver sets limits: %d", res.StatusCode)
	}
	res, body := ada.post("/staff/agents/reader-bot/limits", url.Values{"csrf": {ada.csrf}, "calls_per_second": {"-3"}})
	if res.StatusCode != 422 && res.StatusCode != 400 || !strings.Contains(body, "from 0") {
		t.Fatalf("a negative limit: %d %.300s", res.StatusCode, between(body, `role="alert"`, "</p>"))
	}
	if res, _ := ada.post("/staff/agents/reader-bot/limits", url.Values{"csrf": {ada.csrf}, "calls_per_second": {"500"}, "call_burst": {"1000"}, "max_waiting": {""}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("save: %d", res.StatusCode)
	}
	ag, err := a.store.AgentByName(context.Background(), "reader-bot")
	if err != nil || ag.CallsPerSecond != 500 || ag.CallBurst != 1000 || ag.MaxWaiting != 0 {
		t.Fatalf("the agent: %v %+v", err, ag)
	}
	_, page := ada.get("/staff")
	if row := between(page, `data-agent="reader-bot"`, "</tr>"); !strings.Contains(row, `value="500"`) || !strings.Contains(row, `value="1000"`) {
		t.Fatalf("the row: %q", row)
	}
}

// Vouching is followed down: Ada made Adam able to sign, Adam made Yuri,
// and when Ada and Yuri co-sign, insights name the pair and who is between
// them, over the API and on the page.
func TestInsightsFollowVouchingTwoStepsDeep(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	ada := a.apiToken(models.Admin, "ada@x.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	aud := a.apiToken(models.Auditor, "aud@x.test", "Aud")
	add := func(by, email, name string) string {
		r := a.do("POST", "/api/v1/staff/changes", by, `{"kind":"add","email":"`+email+`","role":"admin","name":"`+name+`"}`)
		if r.Status != 201 {
			t.Fatalf("propose %s: %d %s", name, r.Status, r.Raw)
		}
		a.do("POST", "/api/v1/staff/changes/"+r.Body["change"].(map[string]any)["id"].(string)+"/approve", bob, "")
		tok, err := a.accounts.CreateAPIToken(ctx, email, models.Actor{ID: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	yuri := add(add(ada, "adam@x.test", "Adam"), "yuri@x.test", "Yuri")
	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	r := a.do("POST", "/api/v1/policy/versions", ada, proposeBody(raised, "Yuri will sign"))
	if r := a.do("POST", fmt.Sprintf("/api/v1/policy/versions/%v/approve", versionOf(t, r)["id"]), yuri, ""); r.Status != 200 {
		t.Fatalf("Yuri approves: %d %s", r.Status, r.Raw)
	}
	r = a.do("GET", "/api/v1/insights", aud, "")
	vouched, _ := r.Body["vouched"].([]any)
	var found map[string]any
	for _, v := range vouched {
		if p := v.(map[string]any); p["proposer"] == "Ada" && p["proposed"] == "Yuri" {
			found = p
		}
	}
	if r.Status != 200 || found == nil || fmt.Sprint(found["via"]) != "[Adam]" || found["together"] != float64(1) {
		t.Fatalf("Ada and Yuri, through Adam: %d %s", r.Status, r.Raw)
	}
	a.staff(models.Supervisor, "sue@x.test", "Sue")
	_, page := a.signIn("sue@x.test").get("/insights")
	if got := between(page, `data-testid="vouched"`, "</ul>"); !strings.Contains(got, "Yuri") || !strings.Contains(got, "through Adam") {
		t.Fatalf("the insights page: %q", got)
	}
}

package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/backoffice"
)

// A real OpenID Provider for the tests: npm's oidc-provider (OpenID
// Certified), pinned in .ci/oidc, with users in groups.
type provider struct {
	issuer string
	port   int
}

var opUsers = map[string]any{
	"ada":  map[string]any{"email": "ada@corp.test", "name": "Ada Corp", "groups": []string{"everyone", "cs-admins"}},
	"sam":  map[string]any{"email": "sam@corp.test", "name": "Sam", "groups": []string{"cs-approvers"}},
	"mark": map[string]any{"email": "mark@corp.test", "name": "Mark", "groups": []string{"marketing"}},
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProvider runs the provider, with Countersign's client and another
// client ("other") both allowed to send people to callback.
func startProvider(t *testing.T, port int, callback string, env ...string) *provider {
	t.Helper()
	script, _ := filepath.Abs("../.ci/oidc/op.mjs")
	node, nodeErr := exec.LookPath("node")
	_, err := os.Stat(filepath.Join(filepath.Dir(script), "node_modules", "oidc-provider"))
	if nodeErr != nil || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or .ci/oidc's oidc-provider is missing (%v, %v): .ci/run installs them", nodeErr, err)
		}
		t.Skip("no node or no .ci/oidc/node_modules: run make test, which installs them")
	}
	users, _ := json.Marshal(opUsers)
	clients, _ := json.Marshal([]map[string]any{
		{"client_id": "countersign", "client_secret": "op-secret-1", "redirect_uris": []string{callback}},
		{"client_id": "other", "client_secret": "op-secret-2", "redirect_uris": []string{callback}},
	})
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), fmt.Sprintf("OP_PORT=%d", port), "OP_USERS="+string(users), "OP_CLIENTS="+string(clients))
	cmd.Env = append(cmd.Env, env...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("the OpenID Provider did not start")
	}
	return &provider{issuer: fmt.Sprintf("http://127.0.0.1:%d", port), port: port}
}

// setGroups changes a user's groups at the provider, as its admin would.
func (p *provider) setGroups(t *testing.T, user string, groups ...string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"groups": groups})
	res, err := http.Post(p.issuer+"/test/users/"+user, "application/json", strings.NewReader(string(body)))
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("set groups: %v %v", err, res)
	}
}

// ssoApp is the demo app signing staff in with the provider.
func ssoApp(t *testing.T, env ...string) (*app, *provider) {
	t.Helper()
	port := freePort(t)
	sso := &backoffice.SSOConfig{Issuer: fmt.Sprintf("http://127.0.0.1:%d", port), ClientID: "countersign", ClientSecret: "op-secret-1", Name: "Corp",
		Groups: []accounts.GroupRole{{Group: "cs-admins", Role: models.Admin}, {Group: "cs-supervisors", Role: models.Supervisor}, {Group: "cs-approvers", Role: models.Approver}}}
	a := newAppWith(t, func(c *web.Config) { c.SSO = sso })
	sso.RedirectURL = a.srv.URL + "/login/oidc/callback"
	return a, startProvider(t, port, sso.RedirectURL, env...)
}

var formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)

// providerSignIn goes from Countersign's /login/oidc through the provider's
// sign-in page as user, and returns the callback address the provider
// sends the browser back to (not yet followed). rewrite may change the
// authorization request on its way to the provider.
func providerSignIn(t *testing.T, a *app, jar http.CookieJar, user string, rewrite func(*url.URL)) string {
	t.Helper()
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(a.srv.URL + "/login/oidc?next=/runs")
	if err != nil || res.StatusCode != http.StatusFound {
		t.Fatalf("start: %v %v", err, res)
	}
	next, _ := url.Parse(res.Header.Get("Location"))
	if rewrite != nil {
		rewrite(next)
	}
	for range 10 {
		res, err = client.Get(next.String())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			m := formAction.FindStringSubmatch(string(body))
			if m == nil {
				t.Fatalf("the provider's page has no form: %.500s", body)
			}
			action, _ := next.Parse(m[1])
			res, err = client.PostForm(action.String(), url.Values{"prompt": {"login"}, "login": {user}, "password": {"any"}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		}
		loc, err := res.Location()
		if err != nil {
			t.Fatalf("the provider stopped at %d: %.300s", res.StatusCode, body)
		}
		if strings.HasPrefix(loc.String(), a.srv.URL) {
			return loc.String()
		}
		next = loc
	}
	t.Fatal("the provider never sent the browser back")
	return ""
}

// follow opens the callback in a browser (a cookie jar) and says where it
// went and what it showed.
func follow(t *testing.T, jar http.CookieJar, u string) (int, string, string) {
	t.Helper()
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(body)
}

// The provider's callback checks out only once, only in the browser that
// started it, and only for Countersign's own client.
func TestSSOCallbackRefusesReplaysAndOtherClients(t *testing.T) {
	a, _ := ssoApp(t)
	jar, _ := cookiejar.New(nil)
	back := providerSignIn(t, a, jar, "ada", nil)
	// Another browser with the same callback: no state cookie.
	other, _ := cookiejar.New(nil)
	// It says so, and where to start instead.
	if code, _, body := follow(t, other, back); code != http.StatusUnauthorized ||
		!strings.Contains(body, "No sign-in through the identity provider was started at this address ("+strings.TrimPrefix(a.srv.URL, "http://")+")") ||
		!strings.Contains(body, "sign in again from "+a.srv.URL+"/login") {
		t.Fatalf("a foreign browser's callback: %d %s", code, between(body, `role="alert"`, "</p>"))
	}
	code, loc, body := follow(t, jar, back)
	if code != http.StatusSeeOther || loc != "/runs" {
		t.Fatalf("sign in: %d %s %.300s", code, loc, body)
	}
	st, err := a.store.StaffByEmail(context.Background(), "ada@corp.test")
	if err != nil || st.Role != models.Admin || st.Origin != models.OriginSSO || st.PasswordHash != "" {
		t.Fatalf("the account: %v %+v", err, st)
	}
	// The same callback again, in the same browser: refused.
	if code, _, _ := follow(t, jar, back); code != http.StatusUnauthorized {
		t.Fatalf("a replayed callback: %d", code)
	}
	// A code the provider gave another client, brought to Countersign's
	// callback with Countersign's own state and PKCE challenge: refused.
	jar2, _ := cookiejar.New(nil)
	back = providerSignIn(t, a, jar2, "sam", func(u *url.URL) {
		q := u.Query()
		q.Set("client_id", "other")
		u.RawQuery = q.Encode()
	})
	if code, _, _ := follow(t, jar2, back); code != http.StatusUnauthorized {
		t.Fatalf("another client's code: %d", code)
	}
	if _, err := a.store.StaffByEmail(context.Background(), "sam@corp.test"); err == nil {
		t.Fatal("another client's code made an account")
	}
}

// An ID token that expired before it arrived is refused: the provider's
// clock runs ten minutes behind, its ID tokens live one.
func TestSSORefusesAnExpiredIDToken(t *testing.T) {
	a, _ := ssoApp(t, "OP_CLOCK_OFFSET_S=600", "OP_IDTOKEN_TTL=60")
	jar, _ := cookiejar.New(nil)
	back := providerSignIn(t, a, jar, "ada", nil)
	if code, _, _ := follow(t, jar, back); code != http.StatusUnauthorized {
		t.Fatalf("an expired ID token: %d", code)
	}
	if _, err := a.store.StaffByEmail(context.Background(), "ada@corp.test"); err == nil {
		t.Fatal("an expired ID token made an account")
	}
}

// In Chromium: "Sign in with Corp" lands on /queue with the role the
// person's groups give; a person in no mapped group is refused with words
// that say so; a group changed at the provider changes the role at the
// next sign-in, and a person the provider no longer maps loses their
// sessions.
func TestBrowserSignsInThroughTheCompanysProvider(t *testing.T) {
	a, op := ssoApp(t)
	browser := newBrowser(t)
	signIn := func(user string) context.Context {
		ctx := person(t, browser)
		err := chromedp.Do(ctx,
			chromedp.Navigate(a.srv.URL+"/login"),
			chromedp.Click(chromedp.CSS(`[data-testid=sso]`)),
			chromedp.WaitVisible(chromedp.CSS(`input[name=login]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name=login]`), user),
			chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "any"),
			chromedp.Submit(chromedp.CSS(`input[name=login]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue], [data-testid=login-error]`)),
		)
		if err != nil {
			t.Fatalf("%s signs in: %v", user, err)
		}
		return ctx
	}
	ctx := person(t, browser)
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/login")); err != nil {
		t.Fatal(err)
	}
	if label, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=sso]`))); err != nil || label != "Sign in with Corp" {
		t.Fatalf("the button: %q %v", label, err)
	}
	ada := signIn("ada")
	if where, err := chromedp.Run(ada, chromedp.Location()); err != nil || !strings.HasSuffix(where, "/queue") {
		t.Fatalf("ada lands on %s (%v)", where, err)
	}
	if err := chromedp.Do(ada, chromedp.Navigate(a.srv.URL+"/staff")); err != nil {
		t.Fatal(err)
	}
	if h1, err := chromedp.Run(ada, chromedp.Text(chromedp.CSS(`h1`))); err != nil || h1 != "Staff" {
		t.Fatalf("an admin through SSO opens /staff: %q %v", h1, err)
	}
	mark := signIn("mark")
	if refused, err := chromedp.Run(mark, chromedp.Text(chromedp.CSS(`[data-testid=login-error]`))); err != nil ||
		!strings.Contains(refused, "none of your groups") || !strings.Contains(refused, "marketing") {
		t.Fatalf("mark is told: %q %v", refused, err)
	}
	sam := signIn("sam")
	if st, _ := a.store.StaffByEmail(context.Background(), "sam@corp.test"); st == nil || st.Role != models.Approver {
		t.Fatalf("sam's role: %+v", st)
	}
	op.setGroups(t, "sam", "cs-supervisors")
	signIn("sam")
	if st, _ := a.store.StaffByEmail(context.Background(), "sam@corp.test"); st.Role != models.Supervisor {
		t.Fatalf("the new group did not take: %s", st.Role)
	}
	// Sam's first session ended when the role changed; and when the
	// provider maps Sam no more, the next sign-in is refused and every
	// session of Sam's ends.
	samNow := signIn("sam")
	op.setGroups(t, "sam", "alumni")
	signIn("sam")
	for i, ctx := range []context.Context{sam, samNow} {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/queue")); err != nil {
			t.Fatal(err)
		}
		if where, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.Contains(where, "/login") {
			t.Fatalf("sam's session %d still works: %s %v", i+1, where, err)
		}
	}
}

// The group mapping is changed by a countersigned staff change: proposed
// by one admin, in effect at the next sign-in once another approves.
func TestSSOGroupMappingIsCountersigned(t *testing.T) {
	a, _ := ssoApp(t)
	bob := a.apiToken(models.Admin, "bob@x.test", "Bob")
	carol := a.apiToken(models.Admin, "carol@x.test", "Carol")
	signIn := func(user string) {
		jar, _ := cookiejar.New(nil)
		if code, _, body := follow(t, jar, providerSignIn(t, a, jar, user, nil)); code != http.StatusSeeOther {
			t.Fatalf("%s signs in: %d %.300s", user, code, body)
		}
	}
	signIn("sam")
	r := a.do("POST", "/api/v1/staff/changes", bob, `{"kind":"groups","groups":["cs-admins=admin","cs-approvers=supervisor"]}`)
	if r.Status != http.StatusCreated || r.Body["change"].(map[string]any)["status"] != "proposed" {
		t.Fatalf("propose: %d %s", r.Status, r.Raw)
	}
	id := r.Body["change"].(map[string]any)["id"].(string)
	if r := a.do("POST", "/api/v1/staff/changes/"+id+"/approve", bob, ""); r.Status != http.StatusForbidden {
		t.Fatalf("the proposer approves: %d", r.Status)
	}
	signIn("sam")
	if st, _ := a.store.StaffByEmail(context.Background(), "sam@corp.test"); st.Role != models.Approver {
		t.Fatalf("a proposed mapping took effect: %s", st.Role)
	}
	if r := a.do("POST", "/api/v1/staff/changes/"+id+"/approve", carol, ""); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	signIn("sam")
	if st, _ := a.store.StaffByEmail(context.Background(), "sam@corp.test"); st.Role != models.Supervisor {
		t.Fatalf("the approved mapping did not take: %s", st.Role)
	}
	if r := a.do("POST", "/api/v1/staff/changes", bob, `{"kind":"groups","groups":["cs-admins=boss"]}`); r.Status != 422 && r.Status != 400 {
		t.Fatalf("a bad mapping: %d %s", r.Status, r.Raw)
	}
}

// The sign-in page, opened at another address than the one the provider
// returns to (localhost where the public URL says 127.0.0.1), starts single
// sign-on at the provider's return address, so the callback finds the
// sign-in it started.
func TestSSOStartsWhereTheProviderReturns(t *testing.T) {
	a, _ := ssoApp(t)
	elsewhere := strings.Replace(a.srv.URL, "127.0.0.1", "localhost", 1)
	res, err := http.Get(elsewhere + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `data-testid="sso" href="`+a.srv.URL+`/login/oidc?next=`) {
		t.Fatalf("the sign-in page at %s starts single sign-on at: %s", elsewhere, between(string(body), `data-testid="sso"`, ">"))
	}
}

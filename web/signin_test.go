package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// postFrom signs in (or tries to) as if from the client address ip, through
// a proxy the server trusts.
func (b *browser) postFrom(ip, path string, form url.Values) *http.Response {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.a.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", ip)
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// Failing someone's password from many addresses must not lock them out:
// their own sign-in from another address goes through. The attacker's
// address is still limited.
func TestFailuresElsewhereDoNotLockAStaffMemberOut(t *testing.T) {
	a := newAppWith(t, func(c *web.Config) { c.TrustProxy = true })
	a.staff(models.Approver, "ann@x.test", "Ann")
	attacker := a.browser()
	for i := 0; i < 40; i++ {
		res := attacker.postFrom(fmt.Sprintf("198.51.100.%d", i), "/login", url.Values{"email": {"ann@x.test"}, "password": {"wrong password!"}})
		if res.StatusCode == http.StatusSeeOther {
			t.Fatal("a wrong password signed in")
		}
	}
	limited := false
	for i := 0; i < 8; i++ {
		res := attacker.postFrom("198.51.100.250", "/login", url.Values{"email": {"ann@x.test"}, "password": {"wrong password!"}})
		limited = limited || res.StatusCode == http.StatusTooManyRequests
	}
	if !limited {
		t.Fatal("one address tried eight wrong passwords for one account and was never limited")
	}
	ann := a.browser()
	res := ann.postFrom("192.0.2.7", "/login", url.Values{"email": {"ann@x.test"}, "password": {password}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("Ann's correct password from her own address: %d, want a sign-in", res.StatusCode)
	}
}

func TestSignInRefusesLongEmailsAndNullOrigin(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	b := a.browser()
	res, body := b.post("/login", url.Values{"email": {strings.Repeat("a", 60000) + "@x.test"}, "password": {"x"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not a staff email address") {
		t.Fatalf("a 60 KB email: %d", res.StatusCode)
	}
	req, _ := http.NewRequest("POST", a.srv.URL+"/login", strings.NewReader(url.Values{"email": {"ann@x.test"}, "password": {password}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "null")
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("sign-in with Origin: null: %d, want 403", res.StatusCode)
	}
}

func TestSignInNeverRedirectsToAnotherHost(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	for _, next := range []string{"/\t/evil.example/x", "//evil.example", "/\\evil.example", "https://evil.example/", "/%09/evil.example"} {
		b := a.browser()
		res, _ := b.post("/login", url.Values{"email": {"ann@x.test"}, "password": {password}, "next": {next}})
		loc := res.Header.Get("Location")
		u, err := url.Parse(loc)
		if res.StatusCode != http.StatusSeeOther || err != nil || u.Host != "" || strings.ContainsAny(loc, "\t\\") || strings.HasPrefix(loc, "//") {
			t.Errorf("next=%q: %d Location %q", next, res.StatusCode, loc)
		}
	}
}

// After a wrong password the cursor waits in the password field, the email
// kept.
func TestWrongPasswordFocusesThePassword(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	_, page := a.browser().post("/login", url.Values{"email": {"ann@x.test"}, "password": {"wrong password!"}})
	pw := between(page, `<input type="password"`, ">")
	email := between(page, `<input type="email"`, ">")
	if !strings.Contains(pw, "autofocus") || strings.Contains(email, "autofocus") || !strings.Contains(email, `value="ann@x.test"`) {
		t.Fatalf("email %q password %q", email, pw)
	}
}

// A staff form with several mistakes says all of them at once.
func TestAddStaffSaysEveryProblemAtOnce(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@x.test", "Ada")
	b := a.signIn("ada@x.test")
	res, page := b.post("/staff", url.Values{"csrf": {b.csrf}, "email": {"not-an-email"}, "name": {"Zed"}, "role": {"boss"}})
	msg := between(page, `class="flash error" role="alert">`, "</p>")
	if res.StatusCode != 400 || !strings.Contains(msg, "is not an email address") || !strings.Contains(msg, "use approver, supervisor") {
		t.Fatalf("%d %q", res.StatusCode, msg)
	}
}

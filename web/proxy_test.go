package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// Behind a proxy that ends TLS (the usual production set-up) Countersign is
// reached over plain HTTP. With --trust-proxy it believes the proxy's
// X-Forwarded-Proto and X-Forwarded-Host, so the staff cookie is Secure with
// the __Host- prefix, the chat cookie still works inside a shop's page, and
// posts from the public origin pass the origin checks. Without the flag
// those headers change nothing.
func TestBehindATLSProxy(t *testing.T) {
	for _, trust := range []bool{true, false} {
		a := newAppWith(t, func(c *web.Config) { c.TrustProxy = trust })
		a.staff(models.Approver, "ann@x.test", "Ann")
		proxied := func(req *http.Request) *http.Response {
			t.Helper()
			req.Header.Set("X-Forwarded-Proto", "https")
			req.Header.Set("X-Forwarded-Host", "cs.example")
			req.Header.Set("X-Forwarded-For", "198.51.100.7")
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}

		req, _ := http.NewRequest("POST", a.srv.URL+"/login", strings.NewReader(url.Values{"email": {"ann@x.test"}, "password": {password}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://cs.example")
		res := proxied(req)
		var session *http.Cookie
		for _, ck := range res.Cookies() {
			if strings.Contains(ck.Name, "cs_session") {
				session = ck
			}
		}
		switch {
		case trust && (res.StatusCode != http.StatusSeeOther || session == nil || session.Name != "__Host-cs_session" || !session.Secure):
			t.Fatalf("trusted proxy, login: %d, cookie %+v", res.StatusCode, session)
		case !trust && res.StatusCode != http.StatusForbidden:
			// The Origin names a host this server was not asked for.
			t.Fatalf("untrusted headers, login from another origin: %d", res.StatusCode)
		}

		req, _ = http.NewRequest("POST", a.srv.URL+"/chat/messages", strings.NewReader("text=hello"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		req.Header.Set("Origin", "https://cs.example")
		res = proxied(req)
		var chat *http.Cookie
		for _, ck := range res.Cookies() {
			if ck.Path == "/chat" {
				chat = ck
			}
		}
		switch {
		case trust && (res.StatusCode != 200 || chat == nil || !chat.Secure || chat.SameSite != http.SameSiteNoneMode || !chat.Partitioned):
			t.Fatalf("trusted proxy, chat: %d, cookie %+v", res.StatusCode, chat)
		case !trust && res.StatusCode != http.StatusForbidden:
			t.Fatalf("untrusted headers, chat post from another origin: %d", res.StatusCode)
		}
	}
}

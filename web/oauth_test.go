package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/oauth"
)

// oauthClient is an MCP client doing OAuth by hand, as the spec has it.
type oauthClient struct {
	t        *testing.T
	base     string
	http     *http.Client
	id       string
	redirect string
	verifier string
}

func (o *oauthClient) getJSON(path string, out any) *http.Response {
	o.t.Helper()
	res, err := o.http.Get(o.base + path)
	if err != nil {
		o.t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		json.NewDecoder(res.Body).Decode(out)
	}
	return res
}

func (o *oauthClient) postForm(path string, form url.Values) (int, map[string]any) {
	o.t.Helper()
	res, err := o.http.PostForm(o.base+path, form)
	if err != nil {
		o.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func (o *oauthClient) register(name string) {
	o.t.Helper()
	res, err := o.http.Post(o.base+"/oauth/register", "application/json",
		strings.NewReader(`{"client_name":"`+name+`","redirect_uris":["`+o.redirect+`"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`))
	if err != nil {
		o.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != http.StatusCreated || out["client_id"] == nil {
		o.t.Fatalf("register: %d %v", res.StatusCode, out)
	}
	o.id = out["client_id"].(string)
}

// authorize starts the flow and returns where the browser is sent.
func (o *oauthClient) authorize(extra url.Values) *http.Response {
	o.t.Helper()
	res, err := o.http.Get(o.authorizeURL(extra))
	if err != nil {
		o.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// authorizeURL is the address the client sends a person to, with a new
// PKCE verifier.
func (o *oauthClient) authorizeURL(extra url.Values) string {
	o.verifier = strings.Repeat("v", 20) + time.Now().Format("150405.000000000")
	sum := sha256.Sum256([]byte(o.verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {o.id}, "redirect_uri": {o.redirect}, "state": {"st-1"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"resource": {o.base + "/mcp"}, "scope": {"mcp"}}
	for k, v := range extra {
		q[k] = v
	}
	return o.base + "/oauth/authorize?" + q.Encode()
}

func (o *oauthClient) token(code string) (int, map[string]any) {
	return o.postForm("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {o.redirect},
		"client_id": {o.id}, "code_verifier": {o.verifier}})
}

func mcpWithToken(t *testing.T, base, token string) (*mcp.ClientSession, error) {
	return mcpClient(t, base, token)
}

// The whole flow an MCP client runs given only the URL: a 401 names the
// metadata, the metadata name the server, the client registers, an admin
// consents in the back office as a new outside agent, the code and the
// PKCE verifier buy tokens bound to /mcp, and tools/list and a gated
// tools/call go through as that agent. Refresh tokens rotate; a code works
// once; a token for another resource, a revoked client's and a made-up one
// are refused with WWW-Authenticate.
func TestOAuthForMCPClients(t *testing.T) {
	set, refunds := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	a.staff(models.Admin, "ada@x.test", "Ada")
	admin := a.signIn("ada@x.test")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	o := &oauthClient{t: t, base: a.srv.URL, http: noFollow, redirect: "http://127.0.0.1:33418/oauth/callback"}

	res, err := http.Post(a.srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	challenge := res.Header.Get("WWW-Authenticate")
	if res.StatusCode != 401 || !strings.Contains(challenge, `resource_metadata="`+a.srv.URL+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("/mcp without a token: %d, WWW-Authenticate %q", res.StatusCode, challenge)
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	o.getJSON("/.well-known/oauth-protected-resource/mcp", &prm)
	if prm.Resource != a.srv.URL+"/mcp" || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != a.srv.URL {
		t.Fatalf("protected resource metadata: %+v", prm)
	}
	var asm map[string]any
	o.getJSON("/.well-known/oauth-authorization-server", &asm)
	if asm["registration_endpoint"] != a.srv.URL+"/oauth/register" || asm["issuer"] != a.srv.URL ||
		asm["authorization_response_iss_parameter_supported"] != true || strings.Join(toStrings(asm["code_challenge_methods_supported"]), ",") != "S256" {
		t.Fatalf("authorization server metadata: %v", asm)
	}

	o.register("Desk Assistant")
	// Without PKCE, or for another resource: refused.
	if res := o.authorize(url.Values{"code_challenge": {""}}); res.StatusCode != 400 {
		t.Fatalf("authorize without PKCE: %d", res.StatusCode)
	}
	if res := o.authorize(url.Values{"resource": {"https://elsewhere.test/mcp"}}); res.StatusCode != 400 {
		t.Fatalf("authorize for another resource: %d", res.StatusCode)
	}
	res = o.authorize(nil)
	consent := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(consent, "/oauth/consent?id=") {
		t.Fatalf("authorize: %d to %q", res.StatusCode, consent)
	}
	// An approver cannot consent; the admin sees who asks.
	a.staff(models.Approver, "ann@x.test", "Ann")
	if res, _ := a.signIn("ann@x.test").get(consent); res.StatusCode != http.StatusForbidden {
		t.Fatalf("an approver on the consent page: %d", res.StatusCode)
	}
	res, page := admin.get(consent)
	if res.StatusCode != 200 || !strings.Contains(page, "Desk Assistant") || !strings.Contains(page, o.redirect) {
		t.Fatalf("consent page: %d %s", res.StatusCode, page)
	}
	id := strings.TrimPrefix(consent, "/oauth/consent?id=")
	if res, _ := admin.post("/oauth/consent", url.Values{"id": {id}, "decision": {"authorize"}, "as": {"new"}, "name": {"desk"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("consent without the CSRF token: %d", res.StatusCode)
	}
	res, _ = admin.post("/oauth/consent", url.Values{"csrf": {admin.csrf}, "id": {id}, "decision": {"authorize"}, "as": {"new"}, "name": {"desk"}})
	// The code goes from the admin's own request to the redirect, once.
	back, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(back.String(), o.redirect) || back.Query().Get("state") != "st-1" ||
		back.Query().Get("iss") != a.srv.URL || back.Query().Get("code") == "" {
		t.Fatalf("the authorization response: %d %s", res.StatusCode, back)
	}
	// Whoever started the request, with no session, gets no code from the
	// provider's callback, before or after the consent; a second consent
	// mints none either.
	res, err = noFollow.Get(a.srv.URL + "/oauth/authorize/callback?id=" + url.QueryEscape(id))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusFound || strings.Contains(res.Header.Get("Location"), "code=") {
		t.Fatalf("the callback after consent: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := admin.post("/oauth/consent", url.Values{"csrf": {admin.csrf}, "id": {id}, "decision": {"authorize"}, "as": {"existing"}, "agent": {"desk"}}); res.StatusCode != http.StatusNotFound ||
		strings.Contains(res.Header.Get("Location"), "code=") {
		t.Fatalf("a second consent: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	code := back.Query().Get("code")
	status, tok := o.token(code)
	access, _ := tok["access_token"].(string)
	refresh, _ := tok["refresh_token"].(string)
	if status != 200 || access == "" || refresh == "" {
		t.Fatalf("token: %d %v", status, tok)
	}
	// (A code used twice: TestOAuthAccessTokensExpire.)
	cs, err := mcpWithToken(t, a.srv.URL, access)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 2 {
		t.Fatalf("tools/list with the token: %v %+v", err, list)
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A7", "amount": 900}})
	if err != nil || !strings.Contains(textOf(r), "Waiting for a person") || refunds.Load() != 0 {
		t.Fatalf("a gated call with the token: %v %s", err, textOf(r))
	}
	cs.Close()
	pending, _ := a.store.PendingActions(context.Background(), models.ActionFilter{})
	call, _ := a.store.ToolCall(context.Background(), pending[0].ID)
	run, _ := a.store.Run(context.Background(), call.RunID)
	desk, _ := a.store.AgentByName(context.Background(), "desk")
	if desk == nil || run.AgentID != desk.ID {
		t.Fatalf("the call's run is agent %q, not the agent the admin authorized (%+v)", run.AgentID, desk)
	}
	events, _ := a.store.AuditEventsFor(context.Background(), call.ID)
	if len(events) == 0 || !strings.Contains(events[0].Actor, "agent:desk (OAuth client Desk Assistant, authorized by Ada") {
		t.Fatalf("the call's audit event does not name the client and the admin who authorized it: %+v", events)
	}

	// Refresh tokens rotate: the new pair works (the old one's reuse is
	// TestOAuthAccessTokensExpire's).
	status, tok = o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "client_id": {o.id}})
	if status != 200 || tok["refresh_token"] == refresh || tok["access_token"] == nil {
		t.Fatalf("refresh: %d %v", status, tok)
	}
	access = tok["access_token"].(string)
	if _, err := mcpWithToken(t, a.srv.URL, access); err != nil {
		t.Fatalf("the refreshed token: %v", err)
	}

	refused := func(token, why string) {
		t.Helper()
		req, _ := http.NewRequest("POST", a.srv.URL+"/mcp", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 401 || !strings.Contains(res.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("%s: %d %q %s", why, res.StatusCode, res.Header.Get("WWW-Authenticate"), body)
		}
	}
	refused("made-up-token", "a made-up token")
	// The same token presented to this server under another name is for
	// another resource.
	req, _ := http.NewRequest("POST", strings.Replace(a.srv.URL, "127.0.0.1", "localhost", 1)+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+access)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 401 || !strings.Contains(res.Header.Get("WWW-Authenticate"), "another resource") {
		t.Fatalf("a token at another resource: %v %v", err, res)
	}

	// Listed on /staff, revoked there: its tokens end at once.
	_, page = admin.get("/staff")
	if !strings.Contains(page, "Desk Assistant") || !strings.Contains(page, "Ada") {
		t.Fatalf("/staff does not list the client")
	}
	if res, _ := admin.post("/staff/oauth-clients/"+o.id+"/revoke", url.Values{"csrf": {admin.csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	refused(access, "a revoked client's token")
	if status, _ := o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {o.id}}); status == 200 {
		t.Fatal("a revoked client refreshed its token")
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// An access token lasts 15 minutes: after that /mcp refuses it, and the
// refresh token buys a new one.
func TestOAuthAccessTokensExpire(t *testing.T) {
	store := openStore(t)
	var mu sync.Mutex
	now := time.Now().UTC()
	store.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if _, err := shop.On(store).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := demoAppOn(t, store, nil, false)
	a.staff(models.Admin, "ada@x.test", "Ada")
	admin := a.signIn("ada@x.test")
	o := &oauthClient{t: t, base: a.srv.URL, http: admin.client, redirect: "http://127.0.0.1:33419/cb"}
	o.register("Expiring")
	back, _ := url.Parse(consentAs(t, admin, o.authorizeURL(nil), "expiring"))
	status, tok := o.token(back.Query().Get("code"))
	if status != 200 {
		t.Fatalf("token: %d %v", status, tok)
	}
	if _, err := mcpWithToken(t, a.srv.URL, tok["access_token"].(string)); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	mu.Lock()
	now = now.Add(16 * time.Minute)
	mu.Unlock()
	req, _ := http.NewRequest("POST", a.srv.URL+"/mcp", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+tok["access_token"].(string))
	r, err := http.DefaultClient.Do(req)
	if err != nil || r.StatusCode != 401 || !strings.Contains(r.Header.Get("WWW-Authenticate"), "expired") {
		t.Fatalf("an expired token: %v %+v", err, r)
	}
	status, fresh := o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {o.id}})
	if status != 200 {
		t.Fatalf("refresh after the access token expired: %d %v", status, fresh)
	}
	if _, err := mcpWithToken(t, a.srv.URL, fresh["access_token"].(string)); err != nil {
		t.Fatalf("the refreshed token: %v", err)
	}

	// The answer to a refresh was lost: within two minutes the spent token
	// works once more, and what its first use bought is revoked.
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	status, again := o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {o.id}})
	if status != 200 {
		t.Fatalf("the spent token within its grace: %d %v", status, again)
	}
	if _, err := mcpWithToken(t, a.srv.URL, fresh["access_token"].(string)); err == nil {
		t.Fatal("the tokens the lost answer carried still work")
	}
	if _, err := mcpWithToken(t, a.srv.URL, again["access_token"].(string)); err != nil {
		t.Fatalf("the tokens of the grace: %v", err)
	}
	// Used a third time (the grace is once), it is a stolen token: every
	// token of the sign-in goes, the newest included.
	status, _ = o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}, "client_id": {o.id}})
	if status == 200 {
		t.Fatal("a spent token worked twice more")
	}
	if _, err := mcpWithToken(t, a.srv.URL, again["access_token"].(string)); err == nil {
		t.Fatal("a refresh token used twice left the newer access token working")
	}
	if status, _ := o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {again["refresh_token"].(string)}, "client_id": {o.id}}); status == 200 {
		t.Fatal("a refresh token used twice left the newer refresh token working")
	}

	// A sign-in whose refresh token is reused after the grace loses its
	// tokens too; and a code used twice revokes the tokens it bought.
	back, _ = url.Parse(consentAs(t, admin, o.authorizeURL(nil), "expiring-2"))
	code := back.Query().Get("code")
	status, second := o.token(code)
	if status != 200 {
		t.Fatalf("token: %d %v", status, second)
	}
	if status, _ := o.token(code); status == 200 {
		t.Fatal("a code worked twice")
	}
	if _, err := mcpWithToken(t, a.srv.URL, second["access_token"].(string)); err == nil {
		t.Fatal("a code used twice left its access token working")
	}
	back, _ = url.Parse(consentAs(t, admin, o.authorizeURL(nil), "expiring-3"))
	_, third := o.token(back.Query().Get("code"))
	status, next := o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {third["refresh_token"].(string)}, "client_id": {o.id}})
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, next)
	}
	mu.Lock()
	now = now.Add(3 * time.Minute)
	mu.Unlock()
	if status, _ := o.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {third["refresh_token"].(string)}, "client_id": {o.id}}); status == 200 {
		t.Fatal("a spent token worked after its grace")
	}
	if _, err := mcpWithToken(t, a.srv.URL, next["access_token"].(string)); err == nil {
		t.Fatal("a refresh token reused after its grace left the newer access token working")
	}
}

// Registration takes only what OAuth 2.1 allows (https, or http to the
// client's own machine, or an app's own scheme; public clients) and no
// more than ten a minute from one address.
func TestOAuthRegistrationRefusesWhatItShouldNot(t *testing.T) {
	a := newApp(t)
	post := func(body string) (int, map[string]any) {
		res, err := http.Post(a.srv.URL+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	for _, bad := range []string{
		`{"redirect_uris":["javascript:alert(1)"]}`,
		`{"redirect_uris":["http://evil.example/cb"]}`,
		`{"redirect_uris":["https://ok.example/cb#frag"]}`,
		`{"redirect_uris":[]}`,
		`{"redirect_uris":["https://ok.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`,
		`{"redirect_uris":["https://ok.example/cb"],"grant_types":["implicit"]}`,
		`{"redirect_uris":["https://ok.example/cb"],"client_name":"` + strings.Repeat("x", 101) + `"}`,
		`not json`,
	} {
		if status, out := post(bad); status != 400 || out["error"] == nil {
			t.Errorf("%s: %d %v", bad, status, out)
		}
	}
	ok := 0
	for range 12 {
		if status, _ := post(`{"redirect_uris":["https://ok.example/cb"],"client_name":"ok"}`); status == 201 {
			ok++
		} else if status != 429 {
			t.Fatalf("registration: %d", status)
		}
	}
	if ok < 2 || ok > 10 {
		t.Fatalf("%d of 12 registrations went through after 8 refused ones from one address, want 10 in all at most", ok)
	}
}

// A client named by its metadata document's URL (Client ID Metadata
// Documents) needs no registration: Countersign fetches the document, the
// consent page shows the URL, and the flow goes on as for any client. A
// document that names another client is refused; by default a document is
// never fetched from a private or loopback address.
func TestOAuthClientByMetadataDocument(t *testing.T) {
	var docs *httptest.Server
	docs = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := docs.URL + r.URL.Path
		if r.URL.Path == "/liar.json" {
			id = docs.URL + "/someone-else.json"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"client_id": id, "client_name": "Doc Client",
			"redirect_uris": []string{"http://127.0.0.1:33420/cb"}, "token_endpoint_auth_method": "none"})
	}))
	defer docs.Close()
	set, _ := gateAPITools(t)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", set)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, appConfig{Store: openStore(t), Tools: set, Policy: pol, Log: discardLog(),
		Web: web.Config{MCPWait: 300 * time.Millisecond, OAuthDocuments: docs.Client()}}, false)
	a.staff(models.Admin, "ada@x.test", "Ada")
	admin := a.signIn("ada@x.test")
	o := &oauthClient{t: t, base: a.srv.URL, http: admin.client, id: docs.URL + "/client.json", redirect: "http://127.0.0.1:33420/cb"}

	res := o.authorize(nil)
	consent := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(consent, "/oauth/consent?id=") {
		t.Fatalf("authorize with a document's URL: %d %q", res.StatusCode, consent)
	}
	if _, page := admin.get(consent); !strings.Contains(page, "Doc Client") || !strings.Contains(page, o.id) {
		t.Fatal("the consent page shows neither the document's name nor its URL")
	}
	back, _ := url.Parse(consentAs(t, admin, o.authorizeURL(nil), "doc-agent"))
	status, tok := o.token(back.Query().Get("code"))
	if status != 200 {
		t.Fatalf("token: %d %v", status, tok)
	}
	cs, err := mcpWithToken(t, a.srv.URL, tok["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	cs.Close()
	liar := &oauthClient{t: t, base: a.srv.URL, http: admin.client, id: docs.URL + "/liar.json", redirect: "http://127.0.0.1:33420/cb"}
	if res := liar.authorize(nil); res.StatusCode == http.StatusFound && strings.HasPrefix(res.Header.Get("Location"), "/oauth/consent") {
		t.Fatal("a document naming another client_id was taken")
	}
	// The default fetcher will not reach this machine's own addresses.
	if _, err := oauth.DocumentClient().Get(docs.URL + "/client.json"); err == nil || !strings.Contains(err.Error(), "not a public address") {
		t.Fatalf("the default fetcher reached a loopback address: %v", err)
	}
}

// Anyone may send GET /oauth/authorize, and each request is stored: its
// parameters are bounded (a 900 KiB state was stored whole) and requests
// from one address are limited. A client named by a metadata document it
// has never seen takes from the same limit as registering one: 200
// document URLs from one address made 200 clients.
func TestOAuthAuthorizeIsBounded(t *testing.T) {
	var fetched atomic.Int64
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"client_id": "https://" + r.Host + r.URL.Path, "client_name": "Doc",
			"redirect_uris": []string{"http://127.0.0.1:33420/cb"}, "token_endpoint_auth_method": "none"})
	}))
	defer docs.Close()
	set, _ := gateAPITools(t)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "test", set)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, appConfig{Store: openStore(t), Tools: set, Policy: pol, Log: discardLog(),
		Web: web.Config{MCPWait: 300 * time.Millisecond, OAuthDocuments: docs.Client()}}, false)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	o := &oauthClient{t: t, base: a.srv.URL, http: noFollow, redirect: "http://127.0.0.1:33418/oauth/callback"}
	o.register("Bounded")
	if res := o.authorize(url.Values{"state": {strings.Repeat("s", 4000)}}); res.StatusCode != 400 {
		t.Fatalf("a 4,000-character state: %d", res.StatusCode)
	}
	for i := range 12 {
		doc := &oauthClient{t: t, base: a.srv.URL, http: noFollow, id: fmt.Sprintf("%s/c%d.json", docs.URL, i), redirect: "http://127.0.0.1:33420/cb"}
		res := doc.authorize(nil)
		if i < 9 && res.StatusCode != http.StatusFound { // the registration above took one of the ten
			t.Fatalf("document client %d: %d", i, res.StatusCode)
		}
		if i >= 10 && res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("document client %d past the limit: %d", i, res.StatusCode)
		}
	}
	if fetched.Load() > 10 {
		t.Fatalf("%d documents fetched past the limit", fetched.Load())
	}
	limited := 0
	for range 40 {
		if res := o.authorize(nil); res.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("40 more authorization requests from one address were all stored")
	}
}

// What an attacker met at the edges: a name with a right-to-left override
// and a redirect with a user name before @ are refused at registration; a
// client no admin authorized gets its errors here, not at its redirect (an
// open redirector otherwise); the OpenID document offers only what the
// token endpoint grants; the consent page is not kept by caches.
func TestOAuthEdges(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@x.test", "Ada")
	admin := a.signIn("ada@x.test")
	post := func(body string) int {
		res, err := http.Post(a.srv.URL+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if s := post(`{"client_name":"Claude \u202eplh.evil","redirect_uris":["https://ok.example/cb"]}`); s != 400 {
		t.Fatalf("a name with a bidi override: %d", s)
	}
	if s := post(`{"client_name":"x","redirect_uris":["https://claude.ai@evil.example/cb"]}`); s != 400 {
		t.Fatalf("a redirect with userinfo: %d", s)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	o := &oauthClient{t: t, base: a.srv.URL, http: noFollow, redirect: "https://attacker.example/cb"}
	o.register("Redirector")
	res := o.authorize(url.Values{"response_type": {"token"}})
	if res.StatusCode == http.StatusFound || strings.HasPrefix(res.Header.Get("Location"), "https://attacker.example") {
		t.Fatalf("an unauthorized client's error went to its redirect: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res = o.authorize(nil)
	consent := res.Header.Get("Location")
	if !strings.HasPrefix(consent, "/oauth/consent?id=") {
		t.Fatalf("authorize: %d %q", res.StatusCode, consent)
	}
	if res, _ := admin.get(consent); res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the consent page's Cache-Control: %q", res.Header.Get("Cache-Control"))
	}
	var oidc map[string]any
	o.getJSON("/.well-known/openid-configuration", &oidc)
	if g := strings.Join(toStrings(oidc["grant_types_supported"]), ","); g != "authorization_code,refresh_token" {
		t.Fatalf("the OpenID document offers %q", g)
	}
}

package web_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/chat"
	"github.com/countersign/countersign/web/webtest"
)

const secret = "test-secret-test-secret-test-secret"

type app struct {
	t        *testing.T
	store    *storage.Store
	gate     *gate.Gate
	runner   *runloop.Runner
	accounts *accounts.Service
	srv      *httptest.Server
	server   *web.Server
	core     *core.Core
}

func newApp(t *testing.T) *app { return newAppWith(t, nil) }

func newAppWith(t *testing.T, configure func(*web.Config)) *app {
	t.Helper()
	return newAppServer(t, configure, false)
}

// newAppServer is newAppWith, served over TLS (httptest's self-signed
// certificate for 127.0.0.1) when tls is set.
func newAppServer(t *testing.T, configure func(*web.Config), tls bool) *app {
	t.Helper()
	store := openStore(t)
	if _, err := shop.On(store).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	return demoAppOn(t, store, configure, tls)
}

// demoAppOn serves the demo shop on a store (one of several instances on
// one database, when they share it).
func demoAppOn(t *testing.T, store *storage.Store, configure func(*web.Config), tls bool) *app {
	t.Helper()
	reg, _ := tools.NewRegistry(shop.Tools(store)...)
	policy, err := policy.LoadPolicy(shop.PolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := web.Config{Customers: chat.NewCustomerVerifier(secret), ReplyWait: 5 * time.Second, DemoSecret: secret, DemoCustomers: demoCustomers()}
	if configure != nil {
		configure(&cfg)
	}
	return startApp(t, appConfig{Store: store, Tools: reg, Policy: policy, Model: offline.Model{}, Business: shop.Facts{Store: store},
		Log: discardLog(), Web: cfg}, tls)
}

func openStore(t *testing.T) *storage.Store {
	t.Helper()
	s, _ := storetest.OpenWith(t, storage.Options{Own: shop.Schema})
	return s
}

// startApp wires and serves an app on a port for one test.
// appConfig is what a test's app is built from: the core's settings and,
// in Web, the web side's.
type appConfig struct {
	Store         *storage.Store
	Tools         *tools.Registry
	Policy        policy.Policy
	Model         llm.Model
	Business      gate.BusinessFacts
	Log           *slog.Logger
	ExecutionWait time.Duration
	Reach         outbox.Config
	// SignWithPasskey: admins sign versions and staff changes with passkeys.
	SignWithPasskey bool
	// AuditKey signs checkpoints into Checkpoints, and receipts.
	AuditKey    ed25519.PrivateKey
	Checkpoints string
	Web         web.Config
	// ToolSet is the tools file the tools came from (its MCP servers'
	// prompts and resources pass through /mcp).
	ToolSet *httptool.Set
}

func startApp(t *testing.T, cfg appConfig, tls bool) *app {
	t.Helper()
	// The one root, as `countersign serve` and the benchmarks boot it.
	co, site := webtest.New(core.Config{Store: cfg.Store, Tools: cfg.Tools, Policy: cfg.Policy, Model: cfg.Model, Business: cfg.Business,
		Log: cfg.Log, ExecutionWait: cfg.ExecutionWait, Reach: cfg.Reach, SignWithPasskey: cfg.SignWithPasskey,
		AuditKey: cfg.AuditKey, Checkpoints: cfg.Checkpoints, ToolSet: cfg.ToolSet}, cfg.Web)
	if _, err := co.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(site.Handler())
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		co.Close()
		cfg.Store.Close()
	})
	return &app{t: t, store: cfg.Store, gate: co.Gate, runner: co.Runner, accounts: co.Accounts, srv: srv, server: site, core: co}
}

// demoCustomers are the demo shop's customers, as /demo offers them.
func demoCustomers() []chat.DemoCustomer {
	var out []chat.DemoCustomer
	for _, cu := range shop.Customers() {
		out = append(out, chat.DemoCustomer(cu))
	}
	return out
}

func token(t *testing.T, sec, id, name string, ttl time.Duration) string {
	t.Helper()
	tok, err := chat.SignCustomerToken(sec, id, name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type apiResp struct {
	Status int
	Body   map[string]any
	Raw    string
	Header http.Header
}

func (a *app) do(method, path, bearer, body string) apiResp {
	a.t.Helper()
	return a.doWith(method, path, bearer, body)
}

// doWith is do with extra headers, as name, value pairs.
func (a *app) doWith(method, path, bearer, body string, headers ...string) apiResp {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	checkAgainstOpenAPI(a.t, method, path, body, req.Header, res, raw)
	out := apiResp{Status: res.StatusCode, Raw: string(raw), Header: res.Header}
	_ = json.Unmarshal(raw, &out.Body)
	return out
}

func errCode(r apiResp) string {
	e, _ := r.Body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func lastTurn(r apiResp, role string) string {
	run, _ := r.Body["run"].(map[string]any)
	turns, _ := run["turns"].([]any)
	for i := len(turns) - 1; i >= 0; i-- {
		tu := turns[i].(map[string]any)
		if tu["role"] == role {
			return tu["text"].(string)
		}
	}
	return ""
}

func runStatus(r apiResp) string {
	run, _ := r.Body["run"].(map[string]any)
	s, _ := run["status"].(string)
	return s
}

func TestCreateRunWithCustomerTokenAndReply(t *testing.T) {
	a := newApp(t)
	body, _ := json.Marshal(map[string]string{"message": "Where is my order A1002?", "customer_token": token(t, secret, "cus_alice", "Alice", time.Hour)})
	r := a.do("POST", "/api/v1/runs", "", string(body))
	if r.Status != 201 {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	run := r.Body["run"].(map[string]any)
	if run["customer_id"] != "cus_alice" || run["status"] != "waiting" || !strings.HasPrefix(r.Body["run_token"].(string), "rt_") {
		t.Fatalf("%s", r.Raw)
	}
	if got := lastTurn(r, "assistant"); got != "Order A1002 (Espresso machine, $950.00) was delivered." {
		t.Fatalf("reply %q", got)
	}
	// The assistant turn carries its tool call with the decision.
	turns := run["turns"].([]any)
	calls := turns[1].(map[string]any)["tool_calls"].([]any)
	c := calls[0].(map[string]any)
	if c["tool"] != "get_order_status" || c["status"] != "succeeded" || c["decision"].(map[string]any)["verdict"] != "allow" {
		t.Fatalf("tool call %v", c)
	}

	id, rt := run["id"].(string), r.Body["run_token"].(string)
	if g := a.do("GET", "/api/v1/runs/"+id, rt, ""); g.Status != 200 || runStatus(g) != "waiting" {
		t.Fatalf("get: %d %s", g.Status, g.Raw)
	}
	// The run keeps, with the tool call, its signed receipt once signed
	// (within the signer's gathering moment).
	var receipt string
	for deadline := time.Now().Add(10 * time.Second); receipt == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		g := a.do("GET", "/api/v1/runs/"+id, rt, "")
		c := g.Body["run"].(map[string]any)["turns"].([]any)[1].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
		receipt, _ = c["receipt"].(string)
	}
	if strings.Count(receipt, ".") != 2 {
		t.Fatalf("the run's tool call has no receipt: %q", receipt)
	}
	m := a.do("POST", "/api/v1/runs/"+id+"/messages", rt, `{"text":"what are my orders?"}`)
	if m.Status != 200 || !strings.Contains(lastTurn(m, "assistant"), "You have 3 orders") {
		t.Fatalf("message: %d %s", m.Status, m.Raw)
	}
}

func TestBadCustomerTokensAreRefusedNotDowngraded(t *testing.T) {
	a := newApp(t)
	cases := map[string]string{
		"expired": token(t, secret, "cus_alice", "Alice", -time.Hour),
		"forged":  token(t, "some-other-secret-some-other-secret", "cus_alice", "Alice", time.Hour),
		"garbage": "not.a.jwt",
	}
	for name, tok := range cases {
		body, _ := json.Marshal(map[string]string{"message": "hi", "customer_token": tok})
		r := a.do("POST", "/api/v1/runs", "", string(body))
		if r.Status != 401 || errCode(r) != "unauthorized" {
			t.Errorf("%s: %d %s", name, r.Status, r.Raw)
		}
		if name == "expired" && !strings.Contains(r.Raw, "expired") {
			t.Errorf("expired token message: %s", r.Raw)
		}
	}
	// No token at all: an anonymous run, told to sign in for order help.
	r := a.do("POST", "/api/v1/runs", "", `{"message":"where is A1001?"}`)
	if r.Status != 201 || r.Body["run"].(map[string]any)["customer_id"] != "" || !strings.Contains(lastTurn(r, "assistant"), "Please sign in to the shop first") {
		t.Fatalf("anonymous: %d %s", r.Status, r.Raw)
	}
}

func TestBadRequestsGetClearErrors(t *testing.T) {
	a := newApp(t)
	cases := []struct {
		name, body string
		status     int
		want       string
	}{
		{"malformed", `{"message": "hi"`, 400, "ends in the middle"},
		{"not json", `message=hi`, 400, "not valid JSON"},
		{"wrong type", `{"message": 42}`, 400, `field "message" must be a string`},
		{"unknown field", `{"message":"hi","admin":true}`, 400, `unknown field "admin"`},
		{"empty message", `{"message":"  "}`, 400, "the message is empty"},
		{"too long", `{"message":"` + strings.Repeat("x", runloop.MaxMessageRunes+1) + `"}`, 400, "the limit is 4000"},
		{"huge body", `{"message":"` + strings.Repeat("x", 70000) + `"}`, 413, "over the limit"},
		{"two values", `{"message":"hi"} {"message":"again"}`, 400, "more than one JSON value"},
	}
	for _, c := range cases {
		r := a.do("POST", "/api/v1/runs", "", c.body)
		msg, _ := r.Body["error"].(map[string]any)["message"].(string)
		if r.Status != c.status || !strings.Contains(msg, c.want) || errCode(r) == "" {
			t.Errorf("%s: %d %s", c.name, r.Status, r.Raw)
		}
	}
}

func TestRunTokenOpensOnlyItsOwnRun(t *testing.T) {
	a := newApp(t)
	alice := a.do("POST", "/api/v1/runs", "", `{"message":"hi","customer_token":"`+token(t, secret, "cus_alice", "Alice", time.Hour)+`"}`)
	bob := a.do("POST", "/api/v1/runs", "", `{"message":"hi","customer_token":"`+token(t, secret, "cus_bob", "Bob", time.Hour)+`"}`)
	aliceID := alice.Body["run"].(map[string]any)["id"].(string)
	bobToken := bob.Body["run_token"].(string)
	for _, p := range []string{"", "/events"} {
		if r := a.do("GET", "/api/v1/runs/"+aliceID+p, bobToken, ""); r.Status != 404 {
			t.Errorf("Bob read Alice's run%s: %d %s", p, r.Status, r.Raw)
		}
	}
	if r := a.do("POST", "/api/v1/runs/"+aliceID+"/messages", bobToken, `{"text":"refund $40 on A1001"}`); r.Status != 404 {
		t.Errorf("Bob wrote to Alice's run: %d", r.Status)
	}
	if r := a.do("GET", "/api/v1/runs/"+aliceID, "", ""); r.Status != 401 {
		t.Errorf("no token: %d", r.Status)
	}
	if r := a.do("GET", "/api/v1/runs/"+aliceID, "rt_guess", ""); r.Status != 404 {
		t.Errorf("guessed token: %d", r.Status)
	}
}

// sse reads server-sent events from a stream.
type sse struct {
	res *http.Response
	br  *bufio.Reader
}

type event struct {
	ID, Name string
	Data     map[string]any
}

func (a *app) stream(id, rt, lastEventID string) *sse {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.srv.URL+"/api/v1/runs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+rt)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		a.t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	a.t.Cleanup(func() { res.Body.Close() })
	return &sse{res: res, br: bufio.NewReader(res.Body)}
}

func (s *sse) next(t *testing.T) event {
	t.Helper()
	var ev event
	done := make(chan error, 1)
	go func() {
		for {
			line, err := s.br.ReadString('\n')
			if err != nil {
				done <- err
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "" && ev.Name != "":
				done <- nil
				return
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(line[6:]), &ev.Data)
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return ev
}

// until reads events until one matches.
func (s *sse) until(t *testing.T, match func(event) bool) event {
	t.Helper()
	for i := 0; i < 50; i++ {
		if ev := s.next(t); match(ev) {
			return ev
		}
	}
	t.Fatal("no matching event")
	return event{}
}

func TestEventsStreamThePauseAndTheOutcome(t *testing.T) {
	a := newApp(t)
	r := a.do("POST", "/api/v1/runs", "", `{"message":"refund $900 on order A1002 because it arrived broken","customer_token":"`+token(t, secret, "cus_alice", "Alice", time.Hour)+`"}`)
	if r.Status != 201 || runStatus(r) != "paused" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	if got := lastTurn(r, "system"); !strings.Contains(got, "A team member is reviewing your refund request of $900.00") {
		t.Fatalf("notice %q", got)
	}
	id, rt := r.Body["run"].(map[string]any)["id"].(string), r.Body["run_token"].(string)
	s := a.stream(id, rt, "")
	// The backlog first: the customer's message is turn 1.
	if ev := s.next(t); ev.Name != "turn" || ev.ID != "1" || ev.Data["role"] != "customer" {
		t.Fatalf("first event %+v", ev)
	}
	s.until(t, func(ev event) bool { return ev.Name == "status" && ev.Data["status"] == "paused" })

	calls, _ := a.store.RunCalls(context.Background(), id)
	if _, err := a.gate.Approve(context.Background(), calls[0].ID, models.Actor{ID: "stf_1", Name: "Ann", Role: models.Approver}, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	ev := s.until(t, func(ev event) bool { return ev.Name == "turn" && ev.Data["role"] == "assistant" })
	if !strings.Contains(ev.Data["text"].(string), "Done: I refunded $900.00 on order A1002") {
		t.Fatalf("outcome %+v", ev)
	}
	s.until(t, func(ev event) bool { return ev.Name == "status" && ev.Data["status"] == "waiting" })

	// Reconnecting with Last-Event-ID gets only what came after.
	s2 := a.stream(id, rt, ev.ID)
	if first := s2.next(t); first.Name != "status" {
		t.Fatalf("after Last-Event-ID %s the stream replayed %+v", ev.ID, first)
	}
}

func TestStreamsPerRunAreCapped(t *testing.T) {
	a := newApp(t)
	r := a.do("POST", "/api/v1/runs", "", `{"message":"hi"}`)
	id, rt := r.Body["run"].(map[string]any)["id"].(string), r.Body["run_token"].(string)
	// Each stream's handler subscribes before it answers 200, so once
	// a.stream returns the stream counts.
	for i := 0; i < chat.MaxStreamsPerRun; i++ {
		a.stream(id, rt, "")
	}
	if r := a.do("GET", "/api/v1/runs/"+id+"/events", rt, ""); r.Status != 429 {
		t.Fatalf("stream over the cap: %d", r.Status)
	}
}

func TestHealthAndHTMLErrors(t *testing.T) {
	a := newApp(t)
	if r := a.do("GET", "/healthz", "", ""); r.Status != 200 || r.Body["status"] != "ok" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	// Ready: the schema this binary migrates to, a policy, the tools.
	if r := a.do("GET", "/readyz", "", ""); r.Status != 200 || r.Body["status"] != "ready" || r.Body["schema"] != r.Body["schema_expected"] ||
		r.Body["policy_version"] == "" || r.Body["tools"].(float64) < 1 {
		t.Fatalf("/readyz: %d %s", r.Status, r.Raw)
	}
	res, err := http.Get(a.srv.URL + "/no-such-page")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 404 || !bytes.Contains(b, []byte(`data-testid="error"`)) {
		t.Fatalf("%d %s", res.StatusCode, b)
	}
	if r := a.do("GET", "/api/v1/nothing", "", ""); r.Status != 404 || errCode(r) != "not_found" {
		t.Fatalf("api 404: %d %s", r.Status, r.Raw)
	}
}

func TestRunsAPIIsRateLimited(t *testing.T) {
	a := newApp(t)
	r := a.do("POST", "/api/v1/runs", "", `{"message":"hi"}`)
	id, rt := r.Body["run"].(map[string]any)["id"].(string), r.Body["run_token"].(string)
	var last apiResp
	for i := 0; i < 12; i++ {
		last = a.do("POST", "/api/v1/runs/"+id+"/messages", rt, `{"text":"hi again"}`)
		if last.Status == 429 {
			break
		}
	}
	if last.Status != 429 || errCode(last) != "rate_limited" {
		t.Fatalf("no per-run limit: %d %s", last.Status, last.Raw)
	}
}

package httptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// elsewhere is another host that records whatever reaches it.
type elsewhere struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.seen = append(e.seen, r.Method+" "+r.URL.String()+" "+string(body)+" "+r.Header.Get("X-Api-Key")+r.Header.Get("X-Countersign-Signature"))
		e.mu.Unlock()
		_, _ = w.Write([]byte(`{"refund_id":"stolen"}`))
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *elsewhere) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

func redirectFile(url string) string {
	return `tools:
  - name: refund_order
    risk: high_write
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    http: {method: POST, url: "` + url + `/refunds", secret: "${SIGNING}", headers: {X-Api-Key: "${API_KEY}"}}
  - name: lookup_order
    risk: read
    idempotent: true
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    http: {method: GET, url: "` + url + `/orders/{order_id}", headers: {X-Api-Key: "${API_KEY}"}}
`
}

func loadFile(t *testing.T, src string, vars map[string]string) *httptool.Set {
	t.Helper()
	set, err := httptool.Load([]byte(src), "tools.yaml", httptool.Options{Env: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	return set
}

// A backend that redirects to another host never hands that host the body,
// the tool's headers, the signature or the idempotency key, and the call
// is not recorded as that host's success.
func TestRedirectsNeverLeaveTheToolsOrigin(t *testing.T) {
	other := newElsewhere(t)
	var mu sync.Mutex
	var ownSeen []string
	status := http.StatusTemporaryRedirect
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		ownSeen = append(ownSeen, r.URL.Path+" "+string(body)+" "+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		switch r.URL.Path {
		case "/refunds", "/orders/A1":
			http.Redirect(w, r, other.URL+r.URL.Path, status)
		case "/orders/A2":
			http.Redirect(w, r, "/v2/orders/A2", http.StatusFound)
		case "/v2/orders/A2":
			_, _ = w.Write([]byte(`{"order_id":"A2","moved":true}`))
		case "/orders/A3":
			http.Redirect(w, r, "/orders/A3", http.StatusTemporaryRedirect)
		case "/v2/refunds":
			_, _ = w.Write([]byte(`{"refund_id":"rf_2","key":"` + r.Header.Get("Idempotency-Key") + `"}`))
		}
	}))
	defer own.Close()
	set := loadFile(t, redirectFile(own.URL), map[string]string{"SIGNING": "sig-secret-1", "API_KEY": "api-key-777"})

	var refusal *tools.RefusalError
	_, err := run(t, set, "refund_order", `{"order_id":"A1"}`)
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Message, "redirected the call to "+other.URL) ||
		!strings.Contains(refusal.Message, "nothing was done") {
		t.Fatalf("307 to another host: %v", err)
	}
	_, err = run(t, set, "lookup_order", `{"order_id":"A1"}`)
	if !errors.As(err, &refusal) {
		t.Fatalf("a read redirected away: %v", err)
	}
	// A write redirected with 303 may have been done: a person checks.
	status = http.StatusSeeOther
	_, err = run(t, set, "refund_order", `{"order_id":"A1"}`)
	var unknown *tools.UnknownError
	if !errors.As(err, &unknown) || !strings.Contains(unknown.Message, "may have acted") {
		t.Fatalf("303 to another host after a POST: %v", err)
	}
	if got := other.requests(); len(got) != 0 {
		t.Fatalf("the other host was reached: %q", got)
	}

	// On the tool's own origin a redirect is followed, with its headers.
	out, err := run(t, set, "lookup_order", `{"order_id":"A2"}`)
	if raw, _ := json.Marshal(out); err != nil || !strings.Contains(string(raw), `"moved":true`) {
		t.Fatalf("same-origin redirect: %s %v", raw, err)
	}
	mu.Lock()
	last := ownSeen[len(ownSeen)-1]
	mu.Unlock()
	if last != "/v2/orders/A2  api-key-777" {
		t.Fatalf("the redirected read reached %q", last)
	}
	// A redirect loop stops after a few.
	_, err = run(t, set, "lookup_order", `{"order_id":"A3"}`)
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Message, "itself more than") {
		t.Fatalf("loop: %v", err)
	}
}

// An MCP server reached over HTTP that redirects elsewhere gets none of the
// file's headers there.
func TestMCPServerRedirectKeepsHeadersHome(t *testing.T) {
	other := newElsewhere(t)
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer own.Close()
	src := "mcp_servers:\n  - name: up\n    url: " + own.URL + "/mcp\n    headers: {X-Api-Key: \"${API_KEY}\"}\n"
	set := loadFile(t, src, map[string]string{"API_KEY": "api-key-777"})
	if st := set.Upstreams(); len(st) != 1 || st[0].Connected {
		t.Fatalf("status %+v", st)
	}
	if got := other.requests(); len(got) != 0 {
		t.Fatalf("the other host was reached: %q", got)
	}
}

// Secrets are hidden in every part of a JSON answer, however it is
// escaped, and an answer that merely holds a secret's digits stays whole.
func TestSecretsAreHiddenByTheirDecodedValue(t *testing.T) {
	answer := ""
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
	}))
	defer b.Close()
	src := `tools:
  - name: lookup_order
    risk: read
    input_schema: {type: object, properties: {order_id: {type: string}}, additionalProperties: false}
    http: {method: GET, url: "` + b.URL + `/orders/{order_id}", headers: {X-Token: "${TOKEN}", X-Port: "${PORT}"}}
`
	set := loadFile(t, src, map[string]string{"TOKEN": "tok<&>é/1", "PORT": "18901"})
	for _, tc := range []struct{ answer, want string }{
		{`{"echo":"tok\u003c\u0026\u003e\u00e9/1"}`, `{"echo":"[secret]"}`},
		{`{"echo":"tok<&>\u00e9\/1 was sent"}`, `{"echo":"[secret] was sent"}`},
		{`{"nested":{"list":["a","tok<&>é/1"]},"inner":"{\"t\":\"tok\\u003c\\u0026\\u003e\\u00e9/1\"}"}`, `{"nested":{"list":["a","[secret]"]},"inner":"{\"t\":\"[secret]\"}"}`},
		// Only what held a secret is written anew: the rest as it came.
		{`{"z":"tok<&>é/1" , "a":"<b>\u00e9\/</b>","n":1.50e0}`, `{"z":"[secret]" , "a":"<b>\u00e9\/</b>","n":1.50e0}`},
		{`["tok\u003c\u0026\u003e\u00e9/1",{"tok<&>é/1":1}]`, `["[secret]",{"[secret]":1}]`},
		{`{"port":18901,"total":189014}`, `{"port":"[secret]","total":189014}`},
		{`{"total":189014, "ok": true}`, `{"total":189014, "ok": true}`},
	} {
		answer = tc.answer
		out, err := run(t, set, "lookup_order", `{"order_id":"A1"}`)
		if err != nil {
			t.Fatalf("%s: %v", tc.answer, err)
		}
		raw, ok := out.(json.RawMessage)
		if !ok || !json.Valid(raw) || string(raw) != tc.want {
			t.Errorf("answer %s became %s, want %s", tc.answer, raw, tc.want)
		}
	}
	if got := set.Redact(`text with "tok\u003c\u0026\u003e\u00e9\/1"`); got != `text with "[secret]"` {
		t.Errorf("text %s", got)
	}
}

// {field} stands only in the path or as a query value; values are escaped
// into their place and cannot climb the path.
func TestURLTemplatesKeepArgumentsInTheirPlace(t *testing.T) {
	var mu sync.Mutex
	var got []string
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.RequestURI())
		mu.Unlock()
		_, _ = w.Write([]byte(`{}`))
	}))
	defer b.Close()
	tpl := func(url string) string {
		return `tools:
  - name: search
    risk: read
    input_schema: {type: object, properties: {q: {type: string}, dir: {type: string}, host: {type: string}}, additionalProperties: false}
    http: {method: GET, url: "` + url + `"}
`
	}
	set := loadFile(t, tpl(b.URL+"/files/{dir}/list?q={q}&limit=10"), nil)
	if _, err := run(t, set, "search", `{"q":"x&limit=100000&role=admin","dir":"a/b c"}`); err != nil {
		t.Fatal(err)
	}
	if want := "/files/a%2Fb%20c/list?q=x%26limit%3D100000%26role%3Dadmin&limit=10"; got[0] != want {
		t.Fatalf("sent %s, want %s", got[0], want)
	}
	for _, dir := range []string{"..", "."} {
		tool := set.Tools()[0]
		n, err := tool.Normalize([]byte(`{"q":"x","dir":"` + dir + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		var refusal *tools.RefusalError
		if err := tool.Check(context.Background(), tools.Call{ID: "c"}, n); !errors.As(err, &refusal) || !strings.Contains(refusal.Message, `"`+dir+`"`) {
			t.Fatalf("check of %q: %v", dir, err)
		}
		if _, err := tool.Run(context.Background(), tools.Call{ID: "c"}, n); !errors.As(err, &refusal) {
			t.Fatalf("run of %q: %v", dir, err)
		}
	}
	if len(got) != 1 {
		t.Fatalf("sent %q", got)
	}
	for _, bad := range []string{"http://{host}/x", "http://127.0.0.1:{host}/x", "http://u:{host}@127.0.0.1/x", b.URL + "/x?{q}=1", b.URL + "/x#{q}"} {
		_, err := httptool.Load([]byte(tpl(bad)), "tools.yaml", httptool.Options{Env: env(nil)})
		if err == nil || !strings.Contains(err.Error(), "line 5") || !strings.Contains(err.Error(), "may stand only") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

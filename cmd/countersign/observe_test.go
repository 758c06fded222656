package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// backend is an HTTP tool's service that remembers the trace each request
// carried.
type backend struct {
	mu     sync.Mutex
	traces []string
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.traces = append(b.traces, r.Header.Get("traceparent"))
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

func (b *backend) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.traces...)
}

// observed is a server with three HTTP tools, one allowed (ping), one held
// for a person (pay) and one denied (wipe), an agent key and an approver's
// API token.
type observed struct {
	app             *App
	url             string
	agentKey, staff string
	backend         *backend
}

func startObserved(t *testing.T, cfg config) *observed {
	t.Helper()
	o := &observed{backend: &backend{}}
	srv := httptest.NewServer(o.backend)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	dsn := storetest.DSN(t)
	toolsFile, policyFile := filepath.Join(dir, "tools.yaml"), filepath.Join(dir, "policy.yaml")
	tool := func(name, risk string) string {
		return `  - name: ` + name + `
    risk: ` + risk + `
    idempotent: true
    input_schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
    http: {method: POST, url: "` + srv.URL + `/` + name + `", timeout: 10s}
`
	}
	os.WriteFile(toolsFile, []byte("tools:\n"+tool("ping", "read")+tool("pay", "high_write")+tool("wipe", "high_write")), 0o600)
	os.WriteFile(policyFile, []byte(`rules:
  - name: never-wipe
    tool: wipe
    decision: deny
    reason: nobody wipes
  - name: pay-needs-a-person
    tool: pay
    decision: needs_approval
    reason: money leaves
tests:
  - name: wiping is denied
    tool: wipe
    args: {n: 1}
    expect: deny
`), 0o600)
	cfg.Addr, cfg.DB, cfg.Tools, cfg.Policy = "127.0.0.1:0", dsn, toolsFile, policyFile
	o.app = serveApp(t, cfg, io.Discard)
	o.url = "http://" + o.app.Addr()
	cli := func(stdin string, args ...string) string {
		t.Helper()
		out, code := runCmdIn(t, stdin, append(args, "--db", dsn)...)
		if code != 0 {
			t.Fatalf("%v: %s", args, out)
		}
		return strings.TrimSpace(out)
	}
	o.agentKey = cli("", "agent", "add", "--name", "bot")
	cli("a long enough password\n", "user", "add", "--email", "ann@x.test", "--name", "Ann", "--role", "approver")
	o.staff = cli("", "token", "create", "--email", "ann@x.test")
	return o
}

// call asks the gate API for a call, with a traceparent when one is given,
// and returns the call object.
func (o *observed) call(t *testing.T, tool string, n int, traceparent string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", o.url+"/api/v1/calls", strings.NewReader(fmt.Sprintf(`{"tool":%q,"args":{"n":%d},"session":"s%d"}`, tool, n, n)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+o.agentKey)
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Call map[string]any `json:"call"`
	}
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("call %s: %d %s", tool, res.StatusCode, raw)
	}
	return out.Call
}

// approve approves an action as the approver, through the API.
func (o *observed) approve(t *testing.T, id string) {
	t.Helper()
	code, out, err := post(o.url+"/api/v1/actions/"+id+"/approve", o.staff, `{}`)
	if err != nil || code != http.StatusOK {
		t.Fatalf("approve %s: %d %v %v", id, code, out, err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Debian's Prometheus server scrapes --metrics-addr while the gate allows,
// holds and denies calls and a person approves one; PromQL through its
// HTTP API counts what was done.
func TestPrometheusCountsWhatTheGateDid(t *testing.T) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("Debian's prometheus is missing: .ci/run installs it")
		}
		t.Skip("no prometheus server (apt-get install prometheus)")
	}
	o := startObserved(t, config{MetricsAddr: "127.0.0.1:0"})
	if o.app.MetricsAddr() == "" {
		t.Fatal("--metrics-addr serves nothing")
	}
	for i := range 3 {
		if c := o.call(t, "ping", i, ""); c["status"] != "succeeded" {
			t.Fatalf("ping: %v", c)
		}
	}
	var held []string
	for i := range 2 {
		c := o.call(t, "pay", 10+i, "")
		if c["status"] != "pending" {
			t.Fatalf("pay: %v", c)
		}
		held = append(held, c["id"].(string))
	}
	if c := o.call(t, "wipe", 20, ""); c["status"] != "denied" {
		t.Fatalf("wipe: %v", c)
	}
	o.approve(t, held[0])

	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(conf, []byte(`global: {scrape_interval: 1s}
scrape_configs:
  - job_name: countersign
    static_configs: [{targets: ["`+o.app.MetricsAddr()+`"]}]
`), 0o600)
	web := freePort(t)
	cmd := exec.Command(prom, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	want := map[string]string{
		`sum(countersign_gate_decisions_total{verdict="allow",tool="ping"})`:                                                           "3",
		`sum(countersign_gate_decisions_total{verdict="needs_approval",rule="pay-needs-a-person"})`:                                    "2",
		`sum(countersign_gate_decisions_total{verdict="deny",rule="never-wipe"})`:                                                      "1",
		`sum(countersign_tool_calls_total{status="succeeded"})`:                                                                        "4",
		`sum(countersign_tool_calls_total{status="pending"})`:                                                                          "2",
		`countersign_actions_waiting`:                                                                                                  "1",
		`sum(countersign_action_decision_seconds_count{outcome="approved"})`:                                                           "1",
		`sum(countersign_tool_execution_seconds_count{tool="pay"})`:                                                                    "1",
		`sum(countersign_tool_execution_seconds_count{tool="ping"})`:                                                                   "3",
		`count(go_goroutines) + count(countersign_store_commit_seconds_count) + count(go_sql_open_connections{db_name="countersign"})`: "3",
	}
	deadline := time.Now().Add(90 * time.Second)
	for q, v := range want {
		for {
			got, err := promQuery(web, q)
			if err == nil && got == v {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %q (%v), want %s\nprometheus said:\n%s", q, got, err, v, logs.String())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// promQuery asks Prometheus's HTTP API for an instant query's one value.
func promQuery(addr, q string) (string, error) {
	res, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return "", err
	}
	if out.Status != "success" {
		return "", fmt.Errorf("query failed: %s", out.Error)
	}
	if len(out.Data.Result) != 1 || len(out.Data.Result[0].Value) != 2 {
		return "", fmt.Errorf("%d results", len(out.Data.Result))
	}
	s, _ := out.Data.Result[0].Value[1].(string)
	return s, nil
}

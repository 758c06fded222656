package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/models"
)

// startExampleBackend builds and runs examples/shopbackend as its own
// process, as the README has a user do, and returns its URL.
func startExampleBackend(t *testing.T, secret string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "shopbackend")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/shopbackend").CombinedOutput(); err != nil {
		t.Fatalf("build the example backend: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = append(cmd.Environ(), "SHOP_SIGNING_SECRET="+secret)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the example backend said nothing: %v", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), " on ")
	if !ok {
		t.Fatalf("the example backend said %q", line)
	}
	return url
}

func apiDo(t *testing.T, method, url, bearer, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// A fresh server on examples/tools.yaml and the example backend, driven
// only as the README says: the commands, then the gate API and the staff API.
func TestExampleToolsWithTheExampleBackend(t *testing.T) {
	const secret = "example-signing-secret"
	shopURL := startExampleBackend(t, secret)
	t.Setenv("SHOP_URL", shopURL)
	t.Setenv("SHOP_SIGNING_SECRET", secret)
	db := storetest.DSN(t)
	if out, code := runCmd(t, "policy", "test", "--tools", "../../examples/tools.yaml"); code != 0 {
		t.Fatalf("policy test --tools: %d\n%s", code, out)
	}
	logs := &lockedBuffer{}
	app := serveAppLogging(t, config{Addr: "127.0.0.1:0", DB: db, Tools: "../../examples/tools.yaml"}, logs, logs)
	base := "http://" + app.Addr()

	key, code := runCmd(t, "agent", "add", "--name", "support-bot", "--db", db)
	if code != 0 || !strings.HasPrefix(key, "csa_") {
		t.Fatalf("agent add: %d %s", code, key)
	}
	key = strings.TrimSpace(key)
	// Its own limits, flags after the name: audited, and then in force.
	if out, code := runCmd(t, "agent", "limits", "support-bot", "--calls-per-second", "200", "--call-burst", "400", "--max-waiting", "5", "--db", db); code != 0 ||
		!strings.Contains(out, "calls a second: 200, burst: 400, waiting at once: 5") {
		t.Fatalf("agent limits: %d %s", code, out)
	}
	if out, code := runCmd(t, "agent", "limits", "support-bot", "--max-waiting", "-1", "--db", db); code == 0 {
		t.Fatalf("a negative limit: %s", out)
	}
	if out, code := runCmdIn(t, "correct horse battery staple\n", "user", "add", "--email", "ann@x.test", "--role", "approver", "--name", "Ann", "--db", db); code != 0 {
		t.Fatalf("user add: %s", out)
	}
	staffTok, code := runCmd(t, "token", "create", "--email", "ann@x.test", "--db", db)
	if code != 0 {
		t.Fatalf("token create: %s", staffTok)
	}
	staffTok = strings.TrimSpace(staffTok)

	call := func(body string, headers ...string) map[string]any {
		t.Helper()
		status, out := apiDo(t, "POST", base+"/api/v1/calls", key, body, headers...)
		c, _ := out["call"].(map[string]any)
		if status != 201 && status != 200 || c == nil {
			t.Fatalf("POST /api/v1/calls %s: %d %v", body, status, out)
		}
		return c
	}
	if c := call(`{"tool":"lookup_order","args":{"order_id":"A1002"},"session":"s1","customer_id":"cus_alice"}`); c["status"] != "succeeded" ||
		c["result"].(map[string]any)["item"] != "Espresso machine" {
		t.Fatalf("lookup: %v", c)
	}
	refund := call(`{"tool":"refund_order","args":{"order_id":"A1002","amount":900},"session":"s1","customer_id":"cus_alice"}`, "Idempotency-Key", "s1-refund")
	if refund["status"] != "pending" {
		t.Fatalf("refund: %v", refund)
	}
	id := refund["id"].(string)
	// The approver sees the order, looked up live from the backend.
	_, action := apiDo(t, "GET", base+"/api/v1/actions/"+id, staffTok, "")
	if raw, _ := json.Marshal(action); !strings.Contains(string(raw), "refund_order") {
		t.Fatalf("staff API action: %s", raw)
	}
	// The action page says what the refund comes to beside the decision,
	// in money, from the file's review key facts.
	jar, _ := cookiejar.New(nil)
	ann := &http.Client{Jar: jar}
	if res, err := ann.PostForm(base+"/login", url.Values{"email": {"ann@x.test"}, "password": {"correct horse battery staple"}}); err != nil || res.StatusCode != 200 {
		t.Fatalf("sign in: %v %v", res, err)
	}
	if res, err := ann.Get(base + "/actions/" + id); err != nil {
		t.Fatal(err)
	} else {
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		page := string(raw)
		facts := page[max(strings.Index(page, `data-testid="key-facts"`), 0):]
		facts = facts[:max(strings.Index(facts, "</dl>"), 0)]
		if !strings.Contains(facts, "<dt>Left to refund</dt><dd>$") || !strings.Contains(facts, "<dt>Total</dt><dd>$") {
			t.Fatalf("the action page's key facts: %q", facts)
		}
	}
	if status, out := apiDo(t, "POST", base+"/api/v1/actions/"+id+"/approve", staffTok, `{}`); status != 200 {
		t.Fatalf("approve: %d %v", status, out)
	}
	_, polled := apiDo(t, "GET", base+"/api/v1/calls/"+id+"?wait=10s", key, "")
	done := polled["call"].(map[string]any)
	if done["status"] != "succeeded" || done["result"].(map[string]any)["refund_id"] != "rf_1" {
		t.Fatalf("after approval: %v", done)
	}
	// A retry with the same key is the same call; the backend paid once,
	// with a valid signature (it refuses others).
	if again := call(`{"tool":"refund_order","args":{"order_id":"A1002","amount":900},"session":"s1","customer_id":"cus_alice"}`, "Idempotency-Key", "s1-refund"); again["id"] != id {
		t.Fatalf("retry made a new call: %v", again)
	}
	_, paid := apiDo(t, "GET", shopURL+"/refunds", "", "")
	if list := paid["refunds"].([]any); len(list) != 1 {
		t.Fatalf("the backend paid %d refunds: %v", len(list), paid)
	}
	// More than is left: the backend's refusal reaches the agent.
	over := call(`{"tool":"refund_order","args":{"order_id":"A1002","amount":400},"session":"s1","customer_id":"cus_alice"}`)
	apiDo(t, "POST", base+"/api/v1/actions/"+over["id"].(string)+"/approve", staffTok, `{}`)
	_, polled = apiDo(t, "GET", base+"/api/v1/calls/"+over["id"].(string)+"?wait=10s", key, "")
	if c := polled["call"].(map[string]any); c["status"] != "failed" || !strings.Contains(c["error"].(string), "only $300.00 of order A1002 is left") {
		t.Fatalf("over the limit: %v", c)
	}
	// The decision-only tool: allowed, then reported by the agent.
	esc := call(`{"tool":"escalate_to_human","args":{"why":"asks for a manager"},"session":"s1","customer_id":"cus_alice"}`)
	if status, out := apiDo(t, "POST", base+"/api/v1/calls/"+esc["id"].(string)+"/result", key, `{"ok":true,"result":{"ticket":"T-9"}}`); status != 200 ||
		out["call"].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("report: %d %v", status, out)
	}
	// The audit chain and the records agree.
	if out, code := runCmd(t, "audit", "verify", "--db", db); code != 0 {
		t.Fatalf("audit verify: %s", out)
	}
	// An MCP client that only starts processes reaches the same gate
	// through the stdio bridge.
	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	bridgeCtx, stopBridge := context.WithCancel(context.Background())
	bridged := make(chan error, 1)
	go func() {
		bridged <- run(bridgeCtx, []string{"mcp", "--url", base, "--agent-key", key}, toBridge, fromBridge, io.Discard)
		fromBridge.Close()
	}()
	mc := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil)
	cs, err := mc.Connect(context.Background(), &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatalf("connect through the bridge: %v", err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "B2001"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "Standing desk") {
		t.Fatalf("lookup through the bridge: %v %+v", err, res)
	}
	cs.Close()
	stopBridge()
	<-bridged

	// Neither the audit nor any call's record holds the signing secret.
	if err := app.store.EachAuditEvent(context.Background(), func(e *models.AuditEvent) error {
		if strings.Contains(e.Payload, secret) || strings.Contains(e.Actor, secret) {
			t.Errorf("audit event %d (%s) holds the secret", e.Seq, e.Kind)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{id, over["id"].(string), esc["id"].(string)} {
		c, err := app.store.ToolCall(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if row := c.RawArgs + c.Args + c.Result + c.Error + c.ErrorDetail + c.Context; strings.Contains(row, secret) {
			t.Errorf("call %s holds the secret", id)
		}
	}
	time.Sleep(10 * time.Millisecond)
	if !strings.Contains(logs.String(), "countersign listening") || strings.Contains(logs.String(), secret) {
		t.Fatalf("the log is missing or holds the signing secret:\n%s", logs.String())
	}
}

package web_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
)

// The TypeScript SDK's own OAuth client (.ci/mcp/oauth-client.mjs), given
// only the URL, registers, is sent to consent (an admin's browser, here by
// HTTP), takes the code at its loopback redirect and makes a gated call.
func TestTypeScriptSDKSignsInWithOAuth(t *testing.T) {
	node, script := nodePackage(t, "../oauth-client.mjs")
	set, refunds := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	a.staff(models.Admin, "ada@x.test", "Ada")
	admin := a.signIn("ada@x.test")

	cmd := exec.Command(node, script, a.srv.URL+"/mcp", "refund_order", `{"order_id":"A7","amount":900}`)
	out, _ := cmd.StdoutPipe()
	var errs strings.Builder
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	var result string
	for lines.Scan() {
		line := lines.Text()
		if u, ok := strings.CutPrefix(line, "AUTHORIZE "); ok {
			res, err := http.Get(consentAs(t, admin, u, "ts-agent"))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			continue
		}
		result = line
		break
	}
	var got struct {
		Tools  []string       `json:"tools"`
		Result map[string]any `json:"result"`
		Error  string         `json:"error"`
	}
	if err := json.Unmarshal([]byte(result), &got); err != nil || got.Error != "" || len(got.Tools) != 2 {
		t.Fatalf("the TS SDK client: %q (%v); stderr:\n%s", result, err, errs.String())
	}
	raw, _ := json.Marshal(got.Result)
	if !strings.Contains(string(raw), "Waiting for a person") || refunds.Load() != 0 {
		t.Fatalf("its gated call: %s", raw)
	}
}

// consentAs takes an authorization URL through an admin's consent, as a new
// agent, and returns the client's redirect with the code.
func consentAs(t *testing.T, admin *browser, authorize, agent string) string {
	t.Helper()
	res, err := admin.client.Get(authorize)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	consent := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(consent, "/oauth/consent?id=") {
		t.Fatalf("authorize: %d to %q", res.StatusCode, consent)
	}
	id := strings.TrimPrefix(consent, "/oauth/consent?id=")
	res, _ = admin.post("/oauth/consent", url.Values{"csrf": {admin.csrf}, "id": {id}, "decision": {"authorize"}, "as": {"new"}, "name": {agent}})
	back := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(back, "code=") {
		t.Fatalf("the authorization response: %d %q", res.StatusCode, back)
	}
	return back
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// readyz is what an instance's /readyz says.
func readyz(t *testing.T, inst *instance) (int, map[string]any) {
	t.Helper()
	res, err := http.Get(inst.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// Three `serve` processes on one PostgreSQL database share one policy: a
// version approved on one is in force on all three within a second, and
// the calls each decides after it record it. A version one instance cannot
// load (a rule names a tool its tools file does not have) is in force on
// the two that can; that one says so (/readyz, its instances row, the
// audit log) and denies every call, recorded against that version, with
// words the agent can pass on, rather than decide with the old one.
func TestThreeInstancesFollowOnePolicy(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	bin := buildCountersign(t)
	dsn := storetest.DSN(t)
	dir := t.TempDir()
	both, refundsOnly := filepath.Join(dir, "tools.yaml"), filepath.Join(dir, "refunds-only.yaml")
	refund := `  - name: refund
    risk: high_write
    input_schema: {type: object, properties: {amount: {type: number}}, required: [amount], additionalProperties: false}
    amount: amount
`
	os.WriteFile(both, []byte("tools:\n"+refund+`  - name: note
    risk: low_write
    input_schema: {type: object, properties: {text: {type: string}}, required: [text], additionalProperties: false}
`), 0o600)
	os.WriteFile(refundsOnly, []byte("tools:\n"+refund), 0o600)
	limit := func(n int, extra string) string {
		return fmt.Sprintf(`rules:
  - name: small-refund
    tool: refund
    when: args.amount <= %d
    decision: allow
    reason: small
  - name: refund-needs-approval
    tool: refund
    decision: needs_approval
    reason: a person decides
%stests:
  - name: a $10 refund goes through
    tool: refund
    args: {amount: 10}
    expect: allow
`, n, extra)
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	os.WriteFile(policyFile, []byte(limit(50, "")), 0o600)

	cli := func(stdin string, args ...string) string {
		t.Helper()
		out, code := runCmdIn(t, stdin, append(args, "--db", dsn)...)
		if code != 0 {
			t.Fatalf("%v: %s", args, out)
		}
		return strings.TrimSpace(out)
	}
	insts := []*instance{
		startInstance(t, bin, "--db", dsn, "--tools", both, "--policy", policyFile),
		startInstance(t, bin, "--db", dsn, "--tools", both, "--policy", policyFile),
		startInstance(t, bin, "--db", dsn, "--tools", refundsOnly, "--policy", policyFile),
	}
	cli("a long enough password\n", "user", "add", "--email", "ada@x.test", "--name", "Ada", "--role", "admin")
	cli("a long enough password\n", "user", "add", "--email", "bob@x.test", "--name", "Bob", "--role", "admin")
	ada, bob := cli("", "token", "create", "--email", "ada@x.test"), cli("", "token", "create", "--email", "bob@x.test")
	agent := cli("", "agent", "add", "--name", "bot")
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()

	propose := func(yaml string) (id, hash string) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"yaml": yaml})
		code, out, err := post(insts[0].url+"/api/v1/policy/versions", ada, string(body))
		v, _ := out["version"].(map[string]any)
		if err != nil || code != 201 {
			t.Fatalf("propose: %d %v %v", code, out, err)
		}
		return fmt.Sprint(v["id"]), v["hash"].(string)
	}
	// approve countersigns on instance 2 and returns when it answered.
	approve := func(id string) time.Time {
		t.Helper()
		code, out, err := post(insts[1].url+"/api/v1/policy/versions/"+id+"/approve", bob, `{}`)
		if v, _ := out["version"].(map[string]any); err != nil || code != 200 || v["status"] != "in_force" {
			t.Fatalf("approve: %d %v %v", code, out, err)
		}
		return time.Now()
	}
	// inForceOn waits up to a second for an instance to decide with hash.
	inForceOn := func(inst *instance, hash string, since time.Time) time.Duration {
		t.Helper()
		for time.Since(since) < time.Second {
			if _, r := readyz(t, inst); r["policy_version"] == hash && r["status"] == "ready" {
				return time.Since(since)
			}
			time.Sleep(10 * time.Millisecond)
		}
		_, r := readyz(t, inst)
		t.Fatalf("%s: not in force within a second: %v", inst.url, r)
		return 0
	}
	call := func(inst *instance, tool, args string) map[string]any {
		t.Helper()
		code, out, err := post(inst.url+"/api/v1/calls", agent, fmt.Sprintf(`{"tool":%q,"args":%s,"session":"s1"}`, tool, args))
		c, _ := out["call"].(map[string]any)
		if err != nil || (code != 201 && code != 200) || c == nil {
			t.Fatalf("call on %s: %d %v %v", inst.url, code, out, err)
		}
		return c
	}

	// A change approved on instance 2, proposed on 1, in force on all three.
	id, hash := propose(limit(100, ""))
	at := approve(id)
	for _, inst := range insts {
		t.Logf("%s took version %s after %s", inst.url, id, inForceOn(inst, hash, at))
	}
	for i, inst := range insts {
		c := call(inst, "refund", `{"amount":80}`)
		d, _ := c["decision"].(map[string]any)
		if c["status"] != "allowed" || d["policy_version"] != hash || d["rule"] != "small-refund" {
			t.Fatalf("instance %d decided a $80 refund with %v: %v", i+1, d, c)
		}
	}

	// A version instance 3 cannot load.
	id, hash = propose(limit(100, `  - name: notes-are-denied
    tool: note
    decision: deny
    reason: no notes today
`))
	at = approve(id)
	inForceOn(insts[0], hash, at)
	inForceOn(insts[1], hash, at)
	var r map[string]any
	code := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, r = readyz(t, insts[2]); code == 503 {
			break
		}
	}
	if code != 503 || r["policy_version"] != hash || !strings.Contains(fmt.Sprint(r["problems"]), "could not be loaded on this instance") ||
		!strings.Contains(fmt.Sprint(r["problems"]), "note") {
		t.Fatalf("instance 3 does not say it could not load the version: %d %v", code, r)
	}
	c := call(insts[2], "refund", `{"amount":10}`)
	d, _ := c["decision"].(map[string]any)
	if c["status"] != "denied" || d["policy_version"] != hash || d["rule"] != "policy:not-loaded" ||
		!strings.Contains(fmt.Sprint(c["error"], d["reason"]), "Nothing was done") {
		t.Fatalf("instance 3 decided a call with a policy it could not load: %v", c)
	}
	if c := call(insts[0], "refund", `{"amount":10}`); c["status"] != "allowed" {
		t.Fatalf("instance 1: %v", c)
	}
	live, err := store.LiveInstances(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	failing := 0
	for _, in := range live {
		if in.PolicyError != "" {
			failing++
			if in.PolicyVersion != hash || !strings.Contains(in.PolicyError, "note") {
				t.Fatalf("instances row: %+v", in)
			}
		}
	}
	if failing != 1 {
		t.Fatalf("%d instances say they could not load the version, want 1: %+v", failing, live)
	}
}

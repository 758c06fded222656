package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// apiToken makes a staff member of a role and a staff API token for them.
func (a *app) apiToken(role models.StaffRole, email, name string) string {
	a.t.Helper()
	a.staff(role, email, name)
	tok, err := a.accounts.CreateAPIToken(context.Background(), email, models.Actor{ID: "test"})
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

func versionOf(t *testing.T, r apiResp) map[string]any {
	t.Helper()
	v, ok := r.Body["version"].(map[string]any)
	if !ok {
		t.Fatalf("no version: %d %s", r.Status, r.Raw)
	}
	return v
}

func proposeBody(yaml, note string) string {
	b, _ := json.Marshal(map[string]string{"yaml": yaml, "note": note})
	return string(b)
}

// A policy change is countersigned: an admin proposes it, its tests run and
// it is replayed; only another admin's approval puts it in force, and the
// calls decided after it record it.
func TestPolicyVersionsAreCountersigned(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	ada := a.apiToken(models.Admin, "ada@shop.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@shop.test", "Bob")
	amy := a.apiToken(models.Approver, "amy@shop.test", "Amy")
	sue := a.apiToken(models.Supervisor, "sue@shop.test", "Sue")
	ann := a.apiToken(models.Auditor, "ann@shop.test", "Ann")

	list := a.do("GET", "/api/v1/policy/versions", amy, "")
	vs, _ := list.Body["versions"].([]any)
	if list.Status != 200 || len(vs) != 1 || vs[0].(map[string]any)["status"] != "in_force" ||
		vs[0].(map[string]any)["hash"] != a.gate.Policy().Version() {
		t.Fatalf("the first version: %d %s", list.Status, list.Raw)
	}

	run := models.NewID("run")
	if err := a.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_alice", CustomerName: "Alice", Channel: "api", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	held, err := a.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "issue_refund", Args: []byte(`{"order_id":"A1001","amount":55}`)})
	if err != nil || held.Status != models.CallPending {
		t.Fatalf("a $55 refund: %+v %v", held, err)
	}

	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	for _, who := range []string{amy, sue, ann} {
		if r := a.do("POST", "/api/v1/policy/versions", who, proposeBody(raised, "")); r.Status != 403 {
			t.Fatalf("a non-admin proposed: %d %s", r.Status, r.Raw)
		}
	}
	r := a.do("POST", "/api/v1/policy/versions", ada, proposeBody("rules:\n  - name: x\n    decision: maybe\n", ""))
	if r.Status != 422 || errCode(r) != "invalid" {
		t.Fatalf("a policy that does not load: %d %s", r.Status, r.Raw)
	}
	failing := raised + "  - name: wrong on purpose\n    tool: get_order_status\n    args: {order_id: A1001}\n    expect: deny\n"
	r = a.do("POST", "/api/v1/policy/versions", ada, proposeBody(failing, ""))
	if e, _ := r.Body["error"].(map[string]any); r.Status != 422 || e["tests"] == nil || !strings.Contains(r.Raw, "wrong on purpose") {
		t.Fatalf("a policy whose tests fail: %d %s", r.Status, r.Raw)
	}

	r = a.do("POST", "/api/v1/policy/versions", ada, proposeBody(raised, "refunds up to $60 on their own"))
	if r.Status != 201 {
		t.Fatalf("propose: %d %s", r.Status, r.Raw)
	}
	v := versionOf(t, r)
	id := jsonID(v)
	replay, _ := v["replay"].(map[string]any)
	changes, _ := replay["changes"].([]any)
	if v["status"] != "proposed" || v["author"] != "Ada" || len(changes) != 1 {
		t.Fatalf("proposed: %s", r.Raw)
	}
	ch := changes[0].(map[string]any)
	ex := ch["examples"].([]any)[0].(map[string]any)
	if ch["count"] != float64(1) || ch["to"] != "allow" || ch["to_rule"] != "small-refund" || ex["id"] != held.CallID {
		t.Fatalf("the replay: %+v", ch)
	}
	before := a.gate.Policy().Version()

	path := "/api/v1/policy/versions/" + id
	if r := a.do("POST", path+"/approve", ada, ""); r.Status != 403 || !strings.Contains(r.Raw, "another admin") {
		t.Fatalf("the author approved: %d %s", r.Status, r.Raw)
	}
	for _, who := range []string{amy, sue, ann} {
		if r := a.do("POST", path+"/approve", who, ""); r.Status != 403 {
			t.Fatalf("a non-admin approved: %d %s", r.Status, r.Raw)
		}
	}
	if r := a.do("POST", path+"/approve", bob, `{"replay_digest":"0000"}`); r.Status != 409 {
		t.Fatalf("approved a replay nobody was shown: %d %s", r.Status, r.Raw)
	}
	if a.gate.Policy().Version() != before {
		t.Fatal("in force before it was countersigned")
	}
	r = a.do("POST", path+"/approve", bob, `{"note":"fine","replay_digest":"`+v["replay_digest"].(string)+`"}`)
	if r.Status != 200 || versionOf(t, r)["status"] != "in_force" {
		t.Fatalf("countersigned: %d %s", r.Status, r.Raw)
	}
	if got := a.gate.Policy().Version(); got != v["hash"] {
		t.Fatalf("in force here: %s, want %s", got, v["hash"])
	}
	later, err := a.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "issue_refund", Args: []byte(`{"order_id":"A1002","amount":58}`)})
	if err != nil || later.Status != models.CallSucceeded {
		t.Fatalf("a $58 refund under the new version: %+v %v", later, err)
	}

	// Every call's decision names a version listed.
	list = a.do("GET", "/api/v1/policy/versions", ann, "")
	listed := map[string]string{}
	for _, x := range list.Body["versions"].([]any) {
		listed[x.(map[string]any)["hash"].(string)] = x.(map[string]any)["status"].(string)
	}
	if listed[before] != "retired" || listed[v["hash"].(string)] != "in_force" {
		t.Fatalf("statuses: %v", listed)
	}
	for _, callID := range []string{held.CallID, later.CallID} {
		c, err := a.store.ToolCall(ctx, callID)
		if err != nil || listed[c.PolicyVersion] == "" {
			t.Fatalf("call %s decided by %q, not listed: %v", callID, c.PolicyVersion, err)
		}
	}
	if c, _ := a.store.ToolCall(ctx, later.CallID); c.PolicyVersion != v["hash"] {
		t.Fatalf("a later call recorded %s", c.PolicyVersion)
	}

	// Rejection needs a reason; a rejected version cannot be approved.
	r = a.do("POST", "/api/v1/policy/versions", ada, proposeBody(strings.Replace(raised, "<= 60", "<= 70", 1), ""))
	other := "/api/v1/policy/versions/" + jsonID(versionOf(t, r))
	if r := a.do("POST", other+"/reject", bob, `{"reason":" "}`); r.Status != 400 {
		t.Fatalf("a rejection without a reason: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", other+"/reject", bob, `{"reason":"too generous"}`); r.Status != 200 || versionOf(t, r)["reason"] != "too generous" ||
		versionOf(t, r)["status"] != "rejected" {
		t.Fatalf("reject: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", other+"/approve", bob, ""); r.Status != 409 {
		t.Fatalf("approved a rejected version: %d %s", r.Status, r.Raw)
	}

	// Two proposals over one version: once one is in force, the other must
	// be proposed again over it.
	first := jsonID(versionOf(t, a.do("POST", "/api/v1/policy/versions", ada, proposeBody(strings.Replace(raised, "<= 60", "<= 52", 1), ""))))
	second := jsonID(versionOf(t, a.do("POST", "/api/v1/policy/versions", ada, proposeBody(strings.Replace(raised, "<= 60", "<= 54", 1), ""))))
	if r := a.do("POST", "/api/v1/policy/versions/"+first+"/approve", bob, ""); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/policy/versions/"+second+"/approve", bob, ""); r.Status != 409 || !strings.Contains(r.Raw, "propose it again") {
		t.Fatalf("approved over a version it was not proposed over: %d %s", r.Status, r.Raw)
	}

	// Rollback is proposing an earlier version.
	r = a.do("POST", "/api/v1/policy/versions", ada, proposeBody(string(shop.PolicyYAML), "back to the first"))
	if r.Status != 201 || versionOf(t, r)["hash"] != before {
		t.Fatalf("rollback: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/policy/versions/"+jsonID(versionOf(t, r))+"/approve", bob, ""); r.Status != 200 || a.gate.Policy().Version() != before {
		t.Fatalf("rolled back: %d %s", r.Status, r.Raw)
	}
	events, err := a.store.AuditEventsFor(ctx, "policy:"+id)
	if err != nil || len(events) != 3 || events[0].Kind != models.EventPolicyProposed || events[1].Kind != models.EventPolicySigned ||
		events[2].Kind != models.EventPolicyInForce {
		t.Fatalf("audit of version %s: %+v %v", id, events, err)
	}
}

func jsonID(v map[string]any) string {
	f, _ := v["id"].(float64)
	return strconv.FormatInt(int64(f), 10)
}

// How many people sign a change is the deployment's, kept in the database:
// a version proposed while one person was enough (through an instance
// configured for 1) is not one person's once the deployment needs 2, and
// an instance whose --policy-people disagrees with the database refuses
// to start.
func TestPolicyPeopleAreTheDeployments(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	if n, err := a.store.PolicyPeople(ctx); err != nil || n != 2 {
		t.Fatalf("the deployment's number after the first start: %d %v", n, err)
	}
	ada := a.apiToken(models.Admin, "ada@shop.test", "Ada")
	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	if err := a.store.SetPolicyPeople(ctx, 1, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	r := a.do("POST", "/api/v1/policy/versions", ada, proposeBody(raised, "alone"))
	v := versionOf(t, r)
	if r.Status != 201 || v["people_needed"] != 1.0 {
		t.Fatalf("proposed while one was enough: %d %s", r.Status, r.Raw)
	}
	if err := a.store.SetPolicyPeople(ctx, 2, "here"); err != nil {
		t.Fatal(err)
	}
	if r := a.do("POST", "/api/v1/policy/versions/"+jsonID(v)+"/approve", ada, ""); r.Status != 403 || !strings.Contains(r.Raw, "another admin") {
		t.Fatalf("its author approved it alone once the deployment needs 2: %d %s", r.Status, r.Raw)
	}
	if strings.Contains(a.gate.Policy().(interface{ YAML() string }).YAML(), "<= 60") {
		t.Fatal("in force on one signature")
	}

	for _, c := range []struct {
		people int
		single bool
		want   string
	}{{1, true, "disagrees with this deployment"}, {3, false, "disagrees with this deployment"}} {
		vs, err := versions.New(versions.Config{Store: a.store, Gate: a.gate, People: c.people, SinglePerson: c.single, Host: "h2"})
		if err != nil {
			t.Fatal(err)
		}
		if err := vs.Settle(ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("--policy-people %d on a deployment of 2: %v", c.people, err)
		}
	}
	vs, _ := versions.New(versions.Config{Store: a.store, Gate: a.gate, Host: "h2"})
	if err := vs.Settle(ctx); err != nil || vs.People() != 2 {
		t.Fatalf("an instance without the flag follows the database: %v %d", err, vs.People())
	}
}

// The README documents policies of up to 256 KiB: a 100 KB one is proposed
// (it got 413 under the 64 KiB limit of other bodies), through the API and
// the page, and one over 256 KiB is refused in words.
func TestLargePoliciesUpTo256KiB(t *testing.T) {
	a := newApp(t)
	ada := a.apiToken(models.Admin, "ada@shop.test", "Ada")
	a.staff(models.Admin, "bea@shop.test", "Bea")
	bea := a.signIn("bea@shop.test")
	comment := func(kb int) string { return strings.Repeat("# "+strings.Repeat("x", 97)+"\n", kb*10) }
	big := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1) + comment(100)
	if r := a.do("POST", "/api/v1/policy/versions", ada, proposeBody(big, "")); r.Status != 201 {
		t.Fatalf("a 100 KB policy through the API: %d %.300s", r.Status, r.Raw)
	}
	bigger := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 70", 1) + comment(100)
	if res, _ := bea.post("/policy/versions", url.Values{"yaml": {bigger}, "csrf": {bea.csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a 100 KB policy on the page: %d", res.StatusCode)
	}
	if r := a.do("POST", "/api/v1/policy/versions", ada, proposeBody(big+comment(200), "")); r.Status == 201 || !strings.Contains(r.Raw, "256 KiB") {
		t.Fatalf("a 300 KB policy: %d %.300s", r.Status, r.Raw)
	}
}

// A version's author disabled after proposing it no longer counts as one of
// its signers: one other admin's approval does not put it in force (as
// staff changes and actions drop signers disabled since); a second does.
func TestAPolicyVersionsDisabledAuthorDoesNotSign(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	ada := a.apiToken(models.Admin, "ada@shop.test", "Ada")
	bob := a.apiToken(models.Admin, "bob@shop.test", "Bob")
	cy := a.apiToken(models.Admin, "cy@shop.test", "Cy")
	raised := strings.Replace(string(shop.PolicyYAML), "when: args.amount <= 50", "when: args.amount <= 60", 1)
	r := a.do("POST", "/api/v1/policy/versions", ada, proposeBody(raised, "refunds up to $60 on their own"))
	if r.Status != 201 {
		t.Fatalf("propose: %d %s", r.Status, r.Raw)
	}
	path := "/api/v1/policy/versions/" + jsonID(versionOf(t, r))
	before := a.gate.Policy().Version()
	adaID, _ := a.store.StaffByEmail(ctx, "ada@shop.test")
	if err := a.accounts.SetDisabled(ctx, adaID.ID, true, models.Actor{ID: "test", Role: models.Admin}); err != nil {
		t.Fatal(err)
	}
	r = a.do("POST", path+"/approve", bob, `{"note":"fine"}`)
	if r.Status != 200 || versionOf(t, r)["status"] != "proposed" || a.gate.Policy().Version() != before {
		t.Fatalf("Bob's approval beside a disabled author put it in force: %d %s", r.Status, r.Raw)
	}
	r = a.do("POST", path+"/approve", cy, `{"note":"fine too"}`)
	if r.Status != 200 || versionOf(t, r)["status"] != "in_force" || a.gate.Policy().Version() == before {
		t.Fatalf("two admins still trusted: %d %s", r.Status, r.Raw)
	}
}

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"

	_ "github.com/mattn/go-sqlite3"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

func runCmdIn(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	code := 0
	if err != nil {
		var ex exitError
		code = 1
		if errors.As(err, &ex) {
			code = ex.code
		}
		out.WriteString(err.Error())
	}
	return out.String() + errb.String(), code
}

func runCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runCmdIn(t, "", args...)
}

func TestPolicyTestCommand(t *testing.T) {
	out, code := runCmd(t, "policy", "test")
	if code != 0 || !strings.Contains(out, "policy (built-in default)") || !strings.Contains(out, "3 passed, 0 failed") {
		t.Fatalf("default policy: code %d\n%s", code, out)
	}
	out, code = runCmd(t, "policy", "test", "--demo")
	if code != 0 || !strings.Contains(out, "policy (built-in demo shop policy)") || !strings.Contains(out, "11 passed, 0 failed") {
		t.Fatalf("demo policy: code %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte(`
rules:
  - name: refunds-free-for-all
    tool: issue_refund
    decision: allow
tests:
  - name: a $900 refund needs approval
    tool: issue_refund
    args: {order_id: A1002, amount: 900}
    expect: needs_approval
`), 0o600)
	out, code = runCmd(t, "policy", "test", "--demo", bad)
	if code != 1 || !strings.Contains(out, "FAIL  a $900 refund needs approval") || !strings.Contains(out, "expected needs_approval, got allow") {
		t.Fatalf("failing policy: code %d\n%s", code, out)
	}
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	os.WriteFile(broken, []byte("rules:\n  - name: oops\n    when: args.amount >\n    decision: deny\n"), 0o600)
	out, code = runCmd(t, "policy", "test", broken)
	if code != 1 || !strings.Contains(out, `rule "oops" (line 2): condition does not compile`) {
		t.Fatalf("broken policy: code %d\n%s", code, out)
	}
}

func TestServeRefusesAFailingPolicy(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("tests:\n  - name: reads denied\n    tool: get_order_status\n    args: {order_id: A1}\n    expect: deny\n"), 0o600)
	out, code := runCmd(t, "serve", "--db", filepath.Join(dir, "x.db"), "--policy", bad, "--addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(out, "fails 1 of its tests") {
		t.Fatalf("code %d\n%s", code, out)
	}
}

func TestEnvironmentFillsFlags(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("rules: [{name: x, decision: nope}]\n"), 0o600)
	t.Setenv("COUNTERSIGN_POLICY", bad)
	out, code := runCmd(t, "policy", "test")
	if code != 1 || !strings.Contains(out, "bad.yaml") {
		t.Fatalf("COUNTERSIGN_POLICY ignored: code %d\n%s", code, out)
	}
}

func TestServeBootsAndAuditVerifyDetectsTampering(t *testing.T) {
	db := storetest.DSN(t)
	ctx, cancel := context.WithCancel(context.Background())
	app, err := NewApp(ctx, config{Addr: "127.0.0.1:0", DB: db, Demo: true}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	resp, err := http.Get("http://" + app.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	// The tools in force have a version on SQLite and without a tools
	// file (the demo's), and this one instance has beaten.
	var health map[string]string
	if err := json.Unmarshal(body, &health); err != nil || len(health["tools_version"]) != 64 || health["tools_version"] != app.gate.ToolsVersion() {
		t.Fatalf("healthz tools_version: %s (%v), gate: %q", body, err, app.gate.ToolsVersion())
	}
	if in, err := app.store.InstanceRow(ctx, app.store.Instance()); err != nil || in.HeartbeatAt.IsZero() {
		t.Fatalf("no beat on SQLite: %+v %v", in, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop")
	}
	app.Close()

	out, code := runCmd(t, "audit", "verify", "--db", db)
	if code != 0 || !strings.Contains(out, "audit chain intact: 8 events") { // demo shop + 4 demo staff + the number of people who sign a policy change + the first policy version + the instance's versions
		t.Fatalf("verify: code %d\n%s", code, out)
	}
	raw, err := rawDB(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE audit_events SET payload = '{"records":0}' WHERE seq = 1`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	out, code = runCmd(t, "audit", "verify", "--db", db)
	if code != 1 || !strings.Contains(out, "BROKEN at sequence 1") {
		t.Fatalf("tampered verify: code %d\n%s", code, out)
	}
}

func TestUnknownCommand(t *testing.T) {
	if out, code := runCmd(t, "frobnicate"); code != 2 || !strings.Contains(out, "unknown command") {
		t.Fatalf("code %d\n%s", code, out)
	}
}

func TestWidgetOriginsAreChecked(t *testing.T) {
	got, err := parseOrigins(" https://shop.example , http://localhost:3000/ ")
	if err != nil || len(got) != 2 || got[0] != "https://shop.example" || got[1] != "http://localhost:3000" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"shop.example", "https://shop.example/path", "ftp://x", "https://x?y=1"} {
		if _, err := parseOrigins(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestServeGivesTheGCMoreRoomUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	if tuneGC(func(string) string { return "50" }) {
		t.Fatal("GOGC was set, yet serve changed the GC setting")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent %d after an explicit GOGC, want it left alone (100)", got)
	}
	if !tuneGC(func(string) string { return "" }) {
		t.Fatal("without GOGC, serve did not set its own GC percent")
	}
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Fatalf("GC percent %d, want %d", got, serverGCPercent)
	}
}

func TestBackupCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "cs.db")
	s, err := storage.Open(db, storage.Options{Own: shop.Schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shop.On(s).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()

	copyPath := filepath.Join(dir, "backup.db")
	out, code := runCmd(t, "backup", "--db", db, "--to", copyPath)
	if code != 0 || !strings.Contains(out, "the copy's audit chain is intact: 1 event") {
		t.Fatalf("backup: code %d\n%s", code, out)
	}
	// The copy is a working database: the demo shop is in it.
	out, code = runCmd(t, "audit", "verify", "--db", copyPath)
	if code != 0 || !strings.Contains(out, "intact: 1 event") {
		t.Fatalf("verify the copy: code %d\n%s", code, out)
	}
	c, err := storage.Open(copyPath, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if orders, err := shop.On(c).CustomerOrders(context.Background(), "cus_alice"); err != nil || len(orders) != 3 {
		t.Fatalf("the copy lacks the demo customer's orders: %d, %v", len(orders), err)
	}
	c.Close()

	if out, code := runCmd(t, "backup", "--db", db, "--to", copyPath); code != 1 || !strings.Contains(out, "already exists") {
		t.Fatalf("backup over an existing file: code %d\n%s", code, out)
	}
	if out, code := runCmd(t, "backup", "--db", db); code != 2 || !strings.Contains(out, "backup needs --to FILE") {
		t.Fatalf("backup without --to: code %d\n%s", code, out)
	}
	// A mistyped database path is an error, not a new empty database.
	missing := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{{"backup", "--db", missing, "--to", filepath.Join(dir, "x.db")}, {"audit", "verify", "--db", missing},
		{"token", "create", "--db", missing, "--email", "ops@x.test"}} {
		if out, code := runCmd(t, args...); code != 1 || !strings.Contains(out, "no database at "+missing) {
			t.Fatalf("%v: code %d\n%s", args, code, out)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("the mistyped path was created: %v", err)
	}
}

// A leaked staff API token can be ended alone, without disabling its owner.
func TestTokenRevoke(t *testing.T) {
	db := storetest.DSN(t)
	if out, code := runCmdIn(t, "a long enough password\n", "user", "add", "--db", db, "--email", "ops@x.test", "--role", "admin"); code != 0 {
		t.Fatalf("user add: %d %s", code, out)
	}
	first, code := runCmd(t, "token", "create", "--db", db, "--email", "ops@x.test")
	second, code2 := runCmd(t, "token", "create", "--db", db, "--email", "ops@x.test")
	if code != 0 || code2 != 0 {
		t.Fatalf("token create: %s %s", first, second)
	}
	first, second = strings.TrimSpace(first), strings.TrimSpace(second)

	if out, code := runCmdIn(t, first+"\n", "token", "revoke", "--db", db); code != 0 || !strings.Contains(out, "revoked a staff API token of ops@x.test") {
		t.Fatalf("revoke: %d %s", code, out)
	}
	if out, code := runCmdIn(t, first+"\n", "token", "revoke", "--db", db); code != 1 || !strings.Contains(out, "no such staff API token") {
		t.Fatalf("revoke twice: %d %s", code, out)
	}
	if out, code := runCmdIn(t, "", "token", "revoke", "--db", db); code != 2 || !strings.Contains(out, "reads the token from stdin") {
		t.Fatalf("revoke without a token: %d %s", code, out)
	}

	s, err := storage.Open(db, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	accounts := accounts.New(s)
	if _, err := accounts.StaffForToken(context.Background(), first); err == nil {
		t.Fatal("the revoked token still works")
	}
	st, err := accounts.StaffForToken(context.Background(), second)
	if err != nil || st.Email != "ops@x.test" {
		t.Fatalf("the other token: %v", err)
	}
	rep, err := s.VerifyAuditChain(context.Background())
	if err != nil || !rep.OK {
		t.Fatalf("chain: %+v %v", rep, err)
	}
	events, err := s.AuditEventsFor(context.Background(), st.ID)
	revoked := 0
	for _, e := range events {
		if e.Kind == models.EventStaffTokenRevoked {
			revoked++
		}
	}
	if err != nil || revoked != 1 {
		t.Fatalf("revocations in the audit log: %d %v", revoked, err)
	}
}

// A changed policy file is proposed by core.Reload (SIGHUP in serve) when
// it passes its tests, as an upload would be: the version in force stays
// until admins countersign it. With --policy-from-file the file rules and
// is put in force at once, with an audit event. A failing one is refused
// either way, and the policy in force stays.
func TestPolicyReload(t *testing.T) {
	// Reads now need approval: a different policy that passes its own test.
	changed := []byte(`defaults:
  read: {decision: needs_approval, reason: reads need a person today}
  low_write: {decision: allow, reason: fine}
  high_write: {decision: needs_approval, reason: a person decides}
tests:
  - name: reads need a person
    tool: get_order_status
    args: {order_id: A1001}
    expect: needs_approval
`)
	failing := append(append([]byte{}, changed...), []byte(`  - name: wrong on purpose
    tool: get_order_status
    args: {order_id: A1001}
    expect: allow
`)...)
	start := func(t *testing.T, fromFile bool) (*App, string) {
		policyPath := filepath.Join(t.TempDir(), "policy.yaml")
		if err := os.WriteFile(policyPath, shop.PolicyYAML, 0o600); err != nil {
			t.Fatal(err)
		}
		return serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Policy: policyPath, Demo: true, PolicyFromFile: fromFile}, io.Discard), policyPath
	}
	ctx := context.Background()

	t.Run("proposed", func(t *testing.T) {
		app, policyPath := start(t, false)
		first := app.gate.Policy().Version()
		res, err := http.Get("http://" + app.Addr() + "/healthz") // serving: Run listens for SIGHUP
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		os.WriteFile(policyPath, changed, 0o600)
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil { // as an operator would
			t.Fatal(err)
		}
		var proposed *versions.Version
		for deadline := time.Now().Add(10 * time.Second); proposed == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			all, err := app.core.Versions.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if all[0].Status == models.PolicyProposed {
				proposed = all[0]
			}
		}
		if proposed == nil || proposed.Author != "system" || !strings.HasPrefix(proposed.Source, "file "+policyPath) ||
			proposed.Tests.Passed != 1 || proposed.Replay == nil {
			t.Fatalf("SIGHUP did not propose the file: %+v", proposed)
		}
		if app.gate.Policy().Version() != first {
			t.Fatal("SIGHUP put a policy in force that nobody countersigned")
		}
		// The same file again proposes nothing more.
		if err := app.core.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(policyPath, failing, 0o600)
		if err := app.core.Reload(ctx); err == nil || !strings.Contains(err.Error(), "fails 1 of its tests") {
			t.Fatalf("failing policy: %v", err)
		}
		if all, _ := app.core.Versions.List(ctx); len(all) != 2 {
			t.Fatalf("versions: %d, want the first and the one proposed", len(all))
		}
	})

	t.Run("from file", func(t *testing.T) {
		app, policyPath := start(t, true)
		first := app.gate.Policy().Version()
		os.WriteFile(policyPath, changed, 0o600)
		if err := app.core.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		second := app.gate.Policy().Version()
		if second == first {
			t.Fatalf("the ruling file was not put in force (%s)", second[:12])
		}
		os.WriteFile(policyPath, failing, 0o600)
		if err := app.core.Reload(ctx); err == nil || !strings.Contains(err.Error(), "fails 1 of its tests") {
			t.Fatalf("failing policy: %v", err)
		}
		if app.gate.Policy().Version() != second {
			t.Fatal("a failing policy was put in force")
		}
		rep, err := app.store.VerifyAuditChain(ctx)
		events, err2 := app.store.AuditEventsFor(ctx, second)
		if err != nil || err2 != nil || !rep.OK || len(events) != 1 || events[0].Kind != models.EventPolicyReloaded {
			t.Fatalf("audit: %+v %v %v %+v", rep, err, err2, events)
		}
		in, err := app.store.PolicyInForce(ctx)
		if err != nil || in.Hash != second || !strings.Contains(in.Source, "--policy-from-file") {
			t.Fatalf("in force: %+v %v", in, err)
		}
	})
}

// rawDB opens the database behind Countersign's back, as an attacker with
// access to it would.
func rawDB(db string) (*sql.DB, error) {
	if storage.IsPostgres(db) {
		return sql.Open("pgx", db)
	}
	return sql.Open("sqlite3", db)
}

// `policy replay` says what a candidate policy would have decided about the
// calls recorded, without changing anything.
func TestPolicyReplayCommand(t *testing.T) {
	dir := t.TempDir()
	db := storetest.DSN(t)
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: db, Demo: true}, io.Discard)
	ctx := context.Background()
	run := models.NewID("run")
	if err := app.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_alice", CustomerName: "Alice", Channel: "api", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{`{"order_id":"A1002"}`, `{"order_id":"A1001","amount":20}`} {
		tool := "get_order_status"
		if strings.Contains(args, "amount") {
			tool = "issue_refund"
		}
		if _, err := app.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: tool, Args: []byte(args)}); err != nil {
			t.Fatal(err)
		}
	}
	candidate := filepath.Join(dir, "candidate.yaml")
	os.WriteFile(candidate, []byte("rules:\n  - name: no-refunds\n    tool: issue_refund\n    decision: deny\n    reason: paused\n"), 0o600)
	out, code := runCmd(t, "policy", "replay", candidate, "--demo", "--since", "1h", "--db", db)
	if code != 0 || !strings.Contains(out, "replayed 2 decided calls") || !strings.Contains(out, "1 unchanged, 1 would change") ||
		!strings.Contains(out, "issue_refund: allow by ") || !strings.Contains(out, "-> deny by no-refunds") || !strings.Contains(out, "Refund $20.00 on order A1001") {
		t.Fatalf("replay: %d\n%s", code, out)
	}
	out, code = runCmd(t, "policy", "replay", candidate, "--demo", "--since", "1h", "--db", db, "--json")
	var rep struct {
		Calls   int
		Changes []struct {
			Tool     string `json:"tool"`
			To       string `json:"to"`
			ToRule   string `json:"to_rule"`
			Examples []struct{ ID, Summary string }
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Calls != 2 || len(rep.Changes) != 1 || rep.Changes[0].Examples[0].Summary != "Refund $20.00 on order A1001" ||
		rep.Changes[0].Tool != "issue_refund" || rep.Changes[0].To != "deny" || rep.Changes[0].ToRule != "no-refunds" {
		t.Fatalf("replay --json: %d\n%s", code, out)
	}
	if out, code := runCmd(t, "policy", "replay", "--db", db); code != 2 || !strings.Contains(out, "candidate policy file") {
		t.Fatalf("no file: %d %s", code, out)
	}
}

// --shadow-policy is tried beside the policy in force; one whose own tests
// fail is refused, as the policy in force would be.
func TestServeTakesAShadowPolicy(t *testing.T) {
	dir := t.TempDir()
	shadow := filepath.Join(dir, "shadow.yaml")
	os.WriteFile(shadow, []byte(`rules:
  - name: no-refunds
    tool: issue_refund
    decision: deny
    reason: paused
tests:
  - name: refunds are denied
    tool: issue_refund
    args: {order_id: A1001, amount: 5}
    expect: deny
`), 0o600)
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true, ShadowPolicy: shadow}, io.Discard)
	if p, _ := app.gate.Shadow(); p == nil || !strings.Contains(p.(*policy.FilePolicy).Source, "shadow.yaml") {
		t.Fatalf("shadow in force: %v", p)
	}
	os.WriteFile(shadow, []byte("rules: []\ntests:\n  - name: wrong\n    tool: issue_refund\n    args: {order_id: A1001, amount: 5}\n    expect: deny\n"), 0o600)
	out, code := runCmd(t, "serve", "--db", filepath.Join(dir, "x.db"), "--demo", "--shadow-policy", shadow, "--addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(out, "shadow policy") || !strings.Contains(out, "fails 1 of its tests") {
		t.Fatalf("a failing shadow policy: %d %s", code, out)
	}
}

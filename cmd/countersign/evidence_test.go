package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/countersign/countersign/agent/agenttest"
	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// `countersign evidence verify` checks a call's bundle (from this run's
// database: SQLite, or PostgreSQL on the suite's second pass) with no
// database and no network, and names each alteration with exit 1: an
// event, a link, the checkpoint, the receipt.
func TestEvidenceVerifyNamesEachAlteration(t *testing.T) {
	priv, _, _ := audit.GenerateKey()
	key, err := audit.LoadPrivateKey(string(priv))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := agenttest.New(t, demo.Shop, func(c *core.Config) { c.AuditKey, c.Checkpoints = key, dir })
	ctx := context.Background()
	out := e.Call(e.NewRun("cus_alice", "Alice"), "cus_alice", "issue_refund", `{"order_id":"A1002","amount":200,"reason":"arrived broken"}`)
	if out.Status != models.CallPending {
		t.Fatalf("the refund: %+v", out)
	}
	if res, err := e.Gate.Approve(ctx, out.CallID, agenttest.Approver1, gate.ApproveRequest{}); err != nil || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("approve: %+v %v", res, err)
	}
	e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "get_order_status", `{"order_id":"B2001"}`) // the chain goes on
	if _, _, err := audit.Take(ctx, e.Store, key, dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := e.Core.Evidence(ctx, out.CallID)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b *receipts.Bundle) string {
		raw, _ := json.Marshal(b)
		path := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	verify := func(path string, flags ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		args := append(append([]string{"evidence", "verify"}, flags...), path)
		err := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), err
	}
	if got, err := verify(write("ok", b), "--trust-bundle-keys"); err != nil || !strings.Contains(got, "evidence OK: call "+out.CallID+" (issue_refund), succeeded, 1 approval,") {
		t.Fatalf("an untouched bundle: %q %v", got, err)
	}
	raw, _ := json.Marshal(b)
	for name, c := range map[string]struct {
		edit func(*receipts.Bundle)
		want string
	}{
		"event":      {func(b *receipts.Bundle) { b.Links[0].Actor = "staff:someone else" }, "its content does not hash"},
		"link":       {func(b *receipts.Bundle) { b.Links = append(b.Links[:1:1], b.Links[2:]...) }, "a link is missing"},
		"checkpoint": {func(b *receipts.Bundle) { b.Checkpoint.Seq-- }, "checkpoint: its signature does not verify"},
		"receipt":    {func(b *receipts.Bundle) { b.Receipt = b.Receipt[:len(b.Receipt)-4] + "AAAA" }, "receipt: the signature does not verify"},
	} {
		var altered receipts.Bundle
		_ = json.Unmarshal(raw, &altered)
		c.edit(&altered)
		got, err := verify(write(name, &altered), "--trust-bundle-keys")
		if ex, ok := err.(exitError); !ok || ex.code != 1 || !strings.Contains(got, "FAILED: ") || !strings.Contains(got, c.want) {
			t.Errorf("the %s altered: %q %v; want exit 1 naming %q", name, got, err, c.want)
		}
	}
}

// `countersign receipts rotate-key` makes one new key each time (the first
// on a database that had none), and every key stays published.
func TestRotateKeyMakesOneKeyAndKeepsTheOld(t *testing.T) {
	db := storetest.DSN(t)
	if s, err := storage.Open(db, storage.Options{}); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	for want := 1; want <= 2; want++ {
		out, code := runCmd(t, "receipts", "rotate-key", "--db", db)
		if code != 0 || !strings.Contains(out, "receipts are signed with key cs-") {
			t.Fatalf("rotate: %d %s", code, out)
		}
		s, err := storage.Open(db, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := receipts.PublicKeys(context.Background(), s)
		s.Close()
		if len(keys.Keys) != want || !strings.Contains(out, keys.Keys[want-1].KeyID) {
			t.Fatalf("after rotation %d: %d keys published, said %q", want, len(keys.Keys), out)
		}
	}
}

// An auditor's evidence file of many bundles (the audit page's "Evidence",
// one per line) is checked whole: altering only the last bundle fails the
// file, naming that line; the untouched ones are still reported as holding.
func TestEvidenceVerifyChecksEveryBundleOfAFile(t *testing.T) {
	e := agenttest.New(t, demo.Shop)
	ctx := context.Background()
	var lines [][]byte
	for _, order := range []string{"A1001", "A1002", "A1003"} {
		out := e.Call(e.NewRun("cus_alice", "Alice"), "cus_alice", "get_order_status", `{"order_id":"`+order+`"}`)
		b, err := e.Core.Evidence(ctx, out.CallID)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(b)
		lines = append(lines, raw)
	}
	var last receipts.Bundle
	_ = json.Unmarshal(lines[2], &last)
	last.Links[0].Actor = "staff:someone else"
	altered, _ := json.Marshal(&last)
	keys := filepath.Join(t.TempDir(), "keys.json")
	set, _ := e.Core.Receipts.Keys(ctx)
	kraw, _ := json.Marshal(set)
	_ = os.WriteFile(keys, kraw, 0o600)
	file := func(ls ...[]byte) string {
		path := filepath.Join(t.TempDir(), "evidence.jsonl")
		_ = os.WriteFile(path, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600)
		return path
	}
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"evidence", "verify", "--keys", keys, file(lines[0], lines[1], altered)}, strings.NewReader(""), &stdout, &stderr)
	got := stdout.String()
	if ex, ok := err.(exitError); !ok || ex.code != 1 || !strings.Contains(got, "FAILED: line 3: call "+last.Call) || !strings.Contains(err.Error(), "1 of 3 bundles do not hold") {
		t.Fatalf("the last of three altered: %q %v; want exit 1 naming line 3", got, err)
	}
	if strings.Contains(got, "FAILED: line 1") || strings.Contains(got, "FAILED: line 2") || !strings.Contains(got, "line 1: evidence OK") || !strings.Contains(got, "line 2: evidence OK") {
		t.Fatalf("the untouched bundles: %q", got)
	}
	stdout.Reset()
	if err := run(ctx, []string{"evidence", "verify", "--keys", keys, file(lines...)}, strings.NewReader(""), &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "3 bundles, every one holds") {
		t.Fatalf("three untouched bundles: %q %v", stdout.String(), err)
	}
	stdout.Reset()
	if err := run(ctx, []string{"evidence", "verify", "--keys", keys, file(lines[0], []byte(`{"version":1,"call":"x"`))}, strings.NewReader(""), &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a cut last line: %q %v; want it refused naming line 2", stdout.String(), err)
	}
}

// A receipt re-signed with another key, that key put in the bundle, holds
// against the bundle's own keys: so without --keys the command says plainly
// that nothing was pinned and exits 1 unless the caller chose to trust the
// bundle's keys; with the deployment's keys pinned it fails. A bundle with
// its checkpoint stripped says its chain is unanchored, and
// --require-checkpoint refuses it.
func TestEvidenceVerifyPinsKeysAndAnchors(t *testing.T) {
	priv, _, _ := audit.GenerateKey()
	key, err := audit.LoadPrivateKey(string(priv))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := agenttest.New(t, demo.Shop, func(c *core.Config) { c.AuditKey, c.Checkpoints = key, dir })
	ctx := context.Background()
	out := e.Call(e.NewRun("cus_alice", "Alice"), "cus_alice", "get_order_status", `{"order_id":"A1001"}`)
	if _, _, err := audit.Take(ctx, e.Store, key, dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := e.Core.Evidence(ctx, out.CallID)
	if err != nil || b.Checkpoint == nil {
		t.Fatalf("evidence: %v (checkpoint %v)", err, b != nil && b.Checkpoint != nil)
	}
	tmp := t.TempDir()
	write := func(name string, v any) string {
		raw, _ := json.Marshal(v)
		path := filepath.Join(tmp, name)
		_ = os.WriteFile(path, raw, 0o600)
		return path
	}
	set, _ := e.Core.Receipts.Keys(ctx)
	keys := write("keys.json", set)
	verify := func(path string, flags ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, append(append([]string{"evidence", "verify"}, flags...), path), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), err
	}
	good := write("good.json", b)
	if got, err := verify(good); err == nil || !strings.Contains(err.Error(), "keys were not pinned") || !strings.Contains(got, "evidence OK") {
		t.Fatalf("unpinned: %q %v; want the checks shown and exit 1 saying the keys were not pinned", got, err)
	}
	if got, err := verify(good, "--keys", keys, "--require-checkpoint"); err != nil || !strings.Contains(got, "checkpoint of event") {
		t.Fatalf("pinned and anchored: %q %v", got, err)
	}
	// The forger's key signs the receipt again (the call now "rejected").
	p, _, _ := receipts.Verify(b.Receipt, set)
	p.Status = models.CallRejected
	pub, forger, _ := ed25519.GenerateKey(nil)
	forged := *b
	if forged.Receipt, err = receipts.Sign(p, receipts.KeyID(pub), forger); err != nil {
		t.Fatal(err)
	}
	forged.Keys = jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: receipts.KeyID(pub), Algorithm: "EdDSA", Use: "sig"}}}
	path := write("forged.json", &forged)
	if got, err := verify(path, "--trust-bundle-keys"); err != nil || !strings.Contains(got, "rejected") {
		t.Fatalf("the forged bundle against its own keys: %q %v (the forgery should hold there: that is why keys are pinned)", got, err)
	}
	if got, err := verify(path, "--keys", keys); err == nil || !strings.Contains(got, "FAILED: call "+out.CallID+": receipt:") {
		t.Fatalf("the forged bundle against the pinned keys: %q %v; want it refused", got, err)
	}
	stripped := *b
	stripped.Checkpoint, stripped.CheckpointKey = nil, ""
	path = write("stripped.json", &stripped)
	if got, err := verify(path, "--keys", keys); err != nil || !strings.Contains(got, "unanchored") {
		t.Fatalf("checkpoint stripped: %q %v; want it to say the chain is unanchored", got, err)
	}
	if got, err := verify(path, "--keys", keys, "--require-checkpoint"); err == nil || !strings.Contains(got, "unanchored") {
		t.Fatalf("checkpoint stripped, one required: %q %v; want exit 1", got, err)
	}
}

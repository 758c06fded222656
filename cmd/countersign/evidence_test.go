package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/agenttest"
	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/receipts"
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
	e := agenttest.New(t, func(c *core.Config) { c.AuditKey, c.Checkpoints = key, dir })
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
	verify := func(path string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, []string{"evidence", "verify", path}, strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), err
	}
	if got, err := verify(write("ok", b)); err != nil || !strings.Contains(got, "evidence OK: call "+out.CallID+" (issue_refund), succeeded, 1 approvals") {
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
		got, err := verify(write(name, &altered))
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

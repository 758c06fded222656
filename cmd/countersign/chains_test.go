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
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage/storetest"
)

// Two instances, two audit chains: a refund asked through the second
// instance and approved on the first keeps all its events in the second's
// chain; its receipt names that chain (version 2); a checkpoint is an
// anchor over both heads; the call's evidence bundle carries its chain's
// links and the inclusion of that chain's head in the anchor, and holds
// offline; an altered inclusion fails; `audit verify` holds both chains to
// the anchor, and a whole chain removed is caught.
func TestTwoChainsAnchoredTogether(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	priv, pubPEM, _ := audit.GenerateKey()
	key, err := audit.LoadPrivateKey(string(priv))
	if err != nil {
		t.Fatal(err)
	}
	dir, tmp := t.TempDir(), t.TempDir()
	pubFile := filepath.Join(tmp, "audit.key.pub")
	_ = os.WriteFile(pubFile, pubPEM, 0o600)
	anchored := func(c *core.Config) { c.AuditKey, c.Checkpoints = key, dir }
	first := agenttest.New(t, demo.Shop, anchored)
	second := agenttest.Another(t, first, demo.Shop, anchored)
	if first.Store.Chain() != 0 || second.Store.Chain() != 1 {
		t.Fatalf("chains: %d and %d", first.Store.Chain(), second.Store.Chain())
	}
	ctx := context.Background()
	out := second.Call(second.NewRun("cus_alice", "Alice"), "cus_alice", "issue_refund", `{"order_id":"A1002","amount":200,"reason":"arrived broken"}`)
	if out.Status != models.CallPending {
		t.Fatalf("the refund: %+v", out)
	}
	if res, err := first.Gate.Approve(ctx, out.CallID, agenttest.Approver1, gate.ApproveRequest{}); err != nil || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("approve on the first instance: %+v %v", res, err)
	}
	first.Call(first.NewRun("cus_bob", "Bob"), "cus_bob", "get_order_status", `{"order_id":"B2001"}`)
	evs, _ := first.Store.AuditEventsFor(ctx, out.CallID)
	for _, e := range evs {
		if e.Chain != 1 {
			t.Fatalf("the refund's %s is in chain %d, not the chain of the instance that recorded it (1)", e.Kind, e.Chain)
		}
	}
	_, cp, err := audit.Take(ctx, first.Store, key, dir, time.Now())
	if err != nil || cp.Version != 2 || len(cp.Heads) != 2 {
		t.Fatalf("the checkpoint of two chains: %+v %v", cp, err)
	}

	b, err := first.Core.Evidence(ctx, out.CallID)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := receipts.Verify(b.Receipt, b.Keys)
	if err != nil || p.Version != 2 || p.Audit.Chain != 1 {
		t.Fatalf("the receipt of a call of chain 1: %+v %v", p.Audit, err)
	}
	if b.Version != receipts.BundleVersionChained || b.Inclusion == nil || b.Checkpoint.Heads != nil {
		t.Fatalf("the bundle: version %d, inclusion %v, heads %v", b.Version, b.Inclusion, b.Checkpoint.Heads)
	}
	verify := func(b *receipts.Bundle) (string, error) {
		raw, _ := json.Marshal(b)
		path := filepath.Join(t.TempDir(), "bundle.json")
		_ = os.WriteFile(path, raw, 0o600)
		var stdout, stderr bytes.Buffer
		err := run(ctx, []string{"evidence", "verify", "--trust-bundle-keys", "--require-checkpoint", path}, strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), err
	}
	if got, err := verify(b); err != nil || !strings.Contains(got, "evidence OK: call "+out.CallID) || !strings.Contains(got, "the anchor of 2 chains") {
		t.Fatalf("the bundle: %q %v", got, err)
	}
	b.Inclusion.Head.Seq--
	if got, err := verify(b); err == nil || !strings.Contains(got, "is not among those the anchor signed") {
		t.Fatalf("an altered inclusion: %q %v", got, err)
	}

	audited := func() (string, int) {
		return runCmd(t, "audit", "verify", "--db", first.DSN, "--checkpoints", dir, "--audit-public-key", pubFile)
	}
	if got, code := audited(); code != 0 || !strings.Contains(got, "audit chain intact") || !strings.Contains(got, "events in 2 chains") {
		t.Fatalf("audit verify of two chains: %d %s", code, got)
	}
	storetest.Tamper(t, first.DSN, `DELETE FROM audit_events WHERE chain = 1`, `DELETE FROM audit_heads WHERE chain = 1`)
	if got, code := audited(); code != 1 || !strings.Contains(got, "chain 1: the chain has 0 events but checkpoint") {
		t.Fatalf("audit verify with chain 1 removed: %d %s", code, got)
	}
}

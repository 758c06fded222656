package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/agenttest"
	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models/storage/storetest"
)

// A final call's receipt row deleted behind the server's back fails
// `audit verify` (exit 1, naming the call) once a receipt kept later shows
// that the call's own was signed; a call that ended after the newest
// receipt (a server stopped before it signed) is only "not signed yet".
func TestAuditVerifyFailsOnARemovedReceipt(t *testing.T) {
	e := agenttest.New(t, demo.Shop)
	ctx := context.Background()
	sign := func(ids ...string) {
		if err := e.Core.Receipts.SignAll(ctx, ids); err != nil {
			t.Fatal(err)
		}
	}
	first := e.Call(e.NewRun("cus_alice", "Alice"), "cus_alice", "get_order_status", `{"order_id":"A1001"}`)
	sign(first.CallID)
	e.Clock.Advance(receipts.Overdue + time.Minute)
	later := e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "get_order_status", `{"order_id":"B2001"}`)
	sign(later.CallID)
	if out, code := runCmd(t, "audit", "verify", "--db", e.DSN); code != 0 || !strings.Contains(out, "every final call signed") {
		t.Fatalf("untouched: %d\n%s", code, out)
	}
	storetest.Tamper(t, e.DSN, "DELETE FROM receipts WHERE call_id = '"+first.CallID+"'")
	out, code := runCmd(t, "audit", "verify", "--db", e.DSN)
	if code != 1 || !strings.Contains(out, "receipt of call "+first.CallID+" is MISSING") {
		t.Fatalf("a removed receipt: %d, want exit 1 naming %s\n%s", code, first.CallID, out)
	}
	third := e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "get_order_status", `{"order_id":"B2001"}`)
	storetest.Tamper(t, e.DSN, "DELETE FROM receipts WHERE call_id <> '"+later.CallID+"'")
	sign(first.CallID) // a server that starts signs what is missing
	out, _ = runCmd(t, "audit", "verify", "--db", e.DSN)
	if strings.Contains(out, third.CallID) || !strings.Contains(out, "1 final call is not signed yet") {
		t.Fatalf("a call that ended after the newest receipt is not signed yet, not removed:\n%s", out)
	}
}

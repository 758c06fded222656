package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
)

// The one service behind the gate API and MCP: the same write asked again
// from another session joins the waiting action; a waiter learns the
// outcome; once decided, the same intent gets that outcome, marked as a
// replay, handed over or not, for the intent window; an agent that means a
// second identical action says so.
func TestOutsideCallsJoinWaitAndHandOver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ag := &models.Agent{ID: models.NewID("agt"), Name: "coder", KeyHash: "h1"}
	if err := e.Store.CreateAgent(ctx, ag, "test"); err != nil {
		t.Fatal(err)
	}
	out := &gate.Outside{Gate: e.Gate, Store: e.Store, Recheck: 10 * time.Millisecond}
	refund := gate.OutsideCall{Agent: ag, Session: "first", CustomerID: "cus_alice", Tool: "issue_refund",
		Args: []byte(`{"order_id":"A1002","amount":200,"reason":"arrived broken"}`)}

	first, err := out.Ask(ctx, refund)
	if err != nil || first.Joined || first.Call == nil || first.Call.Status != models.CallPending || !out.Waiting(first.Call) {
		t.Fatalf("first ask: %+v %v", first, err)
	}
	again := refund
	again.Session = "second"
	again.Args = []byte(`{"reason":"arrived broken","amount":200,"order_id":"A1002"}`) // the same, normalized
	second, err := out.Ask(ctx, again)
	if err != nil || !second.Joined || second.Call.ID != first.Call.ID || second.Session != "first" {
		t.Fatalf("the same call from another session was not joined: %+v %v", second, err)
	}

	// A waiter that gives up early gets the call as it stands.
	if c := out.Wait(ctx, first.Call, 30*time.Millisecond, 0, nil); c.Status != models.CallPending {
		t.Fatalf("wait ended with %s", c.Status)
	}
	// One that waits learns the outcome once a person decides; its ticks
	// come while it waits.
	ticks := 0
	waiting := make(chan struct{})
	done := make(chan *models.ToolCall)
	go func() {
		done <- out.Wait(ctx, first.Call, 10*time.Second, 5*time.Millisecond, func(*models.ToolCall) {
			if ticks++; ticks == 1 {
				close(waiting)
			}
		})
	}()
	<-waiting // the waiter is waiting: its first tick came
	if _, err := e.Gate.Approve(ctx, first.Call.ID, approver1, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.Status != models.CallSucceeded || ticks == 0 {
		t.Fatalf("after approval the waiter got %s (%d ticks)", got.Status, ticks)
	}

	// Nobody may have received it: the same request gets that outcome, a
	// replay, not a new call. Having been handed it changes nothing.
	third, err := out.Ask(ctx, refund)
	if err != nil || !third.Joined || !third.Replay() || third.Call.ID != first.Call.ID || third.Call.Status != models.CallSucceeded {
		t.Fatalf("an outcome was not handed to the next identical request: %+v %v", third, err)
	}
	if err := out.HandedOver(ctx, third.Call); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(23 * time.Hour)
	fourth, err := out.Ask(ctx, refund)
	if err != nil || !fourth.Replay() || fourth.Call.ID != first.Call.ID {
		t.Fatalf("the same intent within the window, after the outcome was handed over: %+v %v", fourth, err)
	}
	if n := e.Executions["issue_refund"].Load(); n != 1 {
		t.Fatalf("the refund ran %d times", n)
	}
	// An agent that means a second identical action says so.
	meant := refund
	meant.NewIntent = true
	fifth, err := out.Ask(ctx, meant)
	if err != nil || fifth.Joined || fifth.Outcome.CallID == first.Call.ID || fifth.Outcome.Status != models.CallPending {
		t.Fatalf("a new intent: %+v %v", fifth, err)
	}
	if err := e.Gate.Reject(ctx, fifth.Outcome.CallID, approver1, "once is enough"); err != nil {
		t.Fatal(err)
	}
	// Past the window, asking again asks anew.
	e.Clock.Advance(25 * time.Hour)
	sixth, err := out.Ask(ctx, refund)
	if err != nil || sixth.Joined || sixth.Outcome.CallID == first.Call.ID || sixth.Outcome.CallID == fifth.Outcome.CallID {
		t.Fatalf("past the intent window the same request is a new call: %+v %v", sixth, err)
	}
}

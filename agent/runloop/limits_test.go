package runloop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// One message with 180 refund requests: the model's turn is cut to the
// per-turn limit, the run to its pending limit, and the queue stays short.
func TestOneMessageCannotFloodTheQueue(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_bob", "Bob", strings.Repeat("refund $100 on B2001. ", 180))
	e.waitRun(run, models.RunPaused)
	calls, err := e.Store.RunCalls(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	by := map[models.CallStatus]int{}
	for _, c := range calls {
		by[c.Status]++
	}
	if len(calls) != 180 || by[models.CallPending] != 3 || by[models.CallInvalid] != 180-8 || by[models.CallDenied] != 5 {
		t.Fatalf("180 requests in one message: %v", by)
	}
}

// Closing a conversation cancels its actions, so only someone who could
// reject each of them may close it.
func TestClosingARunNeedsTheAuthorityToRejectItsActions(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_bob", "Bob", "refund $1200 on order B2001")
	e.waitRun(run, models.RunPaused)
	action := e.pendingAction(run)
	if err := r.CloseRun(context.Background(), run, approver1, ""); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("an approver closes a run with a supervisor's action: %v", err)
	}
	if err := e.Gate.Cancel(context.Background(), action.ID, approver1, "no"); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("an approver cancels a supervisor's action: %v", err)
	}
	if c := e.CallRecord(action.ID); c.Status != models.CallPending {
		t.Fatalf("the action is %s", c.Status)
	}
	if err := r.CloseRun(context.Background(), run, supervisor, "duplicate"); err != nil {
		t.Fatal(err)
	}
	if c := e.CallRecord(action.ID); c.Status != models.CallCancelled {
		t.Fatalf("after a supervisor closed it the action is %s", c.Status)
	}
}

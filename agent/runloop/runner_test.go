package runloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// runner is the env's run loop, talking to model.
func (e *env) runner(model llm.Model) *runloop.Runner {
	e.Model.M = model
	return e.Run
}

func (e *env) start(r *runloop.Runner, customerID, name, msg string) string {
	e.T.Helper()
	st, err := r.StartRun(context.Background(), runloop.StartRequest{CustomerID: customerID, CustomerName: name, Channel: "test", Message: msg})
	if err != nil {
		e.T.Fatal(err)
	}
	<-st.Done
	return st.Run.ID
}

func (e *env) say(r *runloop.Runner, runID, msg string) {
	e.T.Helper()
	done, err := r.PostMessage(context.Background(), runID, msg)
	if err != nil {
		e.T.Fatal(err)
	}
	<-done
}

// waitRun waits until the run settles in a status (the run loop works in
// the background after an approval).
func (e *env) waitRun(runID string, status models.RunStatus) *models.Run {
	e.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		run, err := e.Store.Run(context.Background(), runID)
		if err != nil {
			e.T.Fatal(err)
		}
		if run.Status == status {
			return run
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("run %s is %s, want %s; transcript:\n%s", runID, run.Status, status, e.transcript(runID))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) turns(runID string) []models.Turn {
	e.T.Helper()
	ts, err := e.Store.Turns(context.Background(), runID, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	return ts
}

func (e *env) transcript(runID string) string {
	var b strings.Builder
	for _, t := range e.turns(runID) {
		b.WriteString(t.Role + ": " + t.Text + "\n")
	}
	return b.String()
}

func (e *env) lastText(runID, role string) string {
	ts := e.turns(runID)
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].Role == role {
			return ts[i].Text
		}
	}
	return ""
}

func (e *env) pendingAction(runID string) *models.ToolCall {
	e.T.Helper()
	calls, err := e.Store.RunCalls(context.Background(), runID)
	if err != nil {
		e.T.Fatal(err)
	}
	for i := range calls {
		if calls[i].Status == models.CallPending {
			return &calls[i]
		}
	}
	e.T.Fatalf("no pending action in run %s:\n%s", runID, e.transcript(runID))
	return nil
}

func TestConversationOrderStatus(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_alice", "Alice", "Where is my order A1002?")
	e.waitRun(run, models.RunWaiting)
	if got := e.lastText(run, "assistant"); got != "Order A1002 (Espresso machine, $950.00) was delivered." {
		t.Fatalf("reply %q\n%s", got, e.transcript(run))
	}
	roles := []string{}
	for _, tu := range e.turns(run) {
		roles = append(roles, tu.Role)
	}
	if strings.Join(roles, ",") != "customer,assistant,tool,assistant" {
		t.Fatalf("turns %v", roles)
	}
}

func TestConversationSmallRefund(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_alice", "Alice", "Please refund $20 on order A1001 because it arrived late")
	e.waitRun(run, models.RunWaiting)
	if got := e.lastText(run, "assistant"); !strings.Contains(got, "Done: I refunded $20.00 on order A1001") {
		t.Fatalf("reply %q", got)
	}
	if e.Order("A1001").RefundedCents != 2000 {
		t.Fatal("refund not recorded on the order")
	}
}

func TestConversationBigRefundPausesAndResumesAfterApproval(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_alice", "Alice", "refund $900 on order A1002 because it arrived broken")
	e.waitRun(run, models.RunPaused)
	notice := e.lastText(run, "system")
	if notice != "A team member is reviewing your refund request of $900.00 on order A1002. You'll see the outcome here." {
		t.Fatalf("notice %q", notice)
	}
	if e.lastText(run, "assistant") != "" {
		t.Fatal("the customer saw model text while paused")
	}
	action := e.pendingAction(run)
	if action.Reason != "Refund of $900.00" || !strings.Contains(action.Args, `"reason":"it arrived broken"`) {
		t.Fatalf("action %+v", action)
	}
	if _, err := e.Gate.Approve(context.Background(), action.ID, approver1, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	e.waitRun(run, models.RunWaiting)
	if got := e.lastText(run, "assistant"); !strings.Contains(got, "Done: I refunded $900.00 on order A1002") {
		t.Fatalf("reply %q\n%s", got, e.transcript(run))
	}
	if n := e.Executions["issue_refund"].Load(); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}
	if e.Order("A1002").RefundedCents != 90000 {
		t.Fatal("refund missing")
	}
}

func TestConversationRejectedIsExplainedAndNotRetried(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_alice", "Alice", "refund $900 on order A1002")
	e.waitRun(run, models.RunPaused)
	if err := e.Gate.Reject(context.Background(), e.pendingAction(run).ID, approver1, "the item was returned used"); err != nil {
		t.Fatal(err)
	}
	e.waitRun(run, models.RunWaiting)
	got := e.lastText(run, "assistant")
	if !strings.Contains(got, "declined the refund of $900.00 on order A1002") || !strings.Contains(got, "the item was returned used") {
		t.Fatalf("reply %q", got)
	}
	var toolResult string
	for _, tu := range e.turns(run) {
		if tu.Role == "tool" {
			toolResult = tu.Text
		}
	}
	if !strings.Contains(toolResult, "Do not retry this call") {
		t.Fatalf("model was told %q", toolResult)
	}
	calls, _ := e.Store.RunCalls(context.Background(), run)
	if len(calls) != 1 || e.Executions["issue_refund"].Load() != 0 {
		t.Fatalf("%d calls, %d executions", len(calls), e.Executions["issue_refund"].Load())
	}
}

func TestConversationExpired(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_alice", "Alice", "refund $900 on order A1002")
	e.waitRun(run, models.RunPaused)
	e.Clock.Advance(25 * time.Hour)
	if n, err := e.Gate.ExpireOverdueActions(context.Background()); err != nil || n != 1 {
		t.Fatalf("expired %d: %v", n, err)
	}
	e.waitRun(run, models.RunWaiting)
	if got := e.lastText(run, "assistant"); !strings.Contains(got, "nobody could review the refund of $900.00 on order A1002 in time") {
		t.Fatalf("reply %q", got)
	}
}

func TestConversationOneAllowedOnePending(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_alice", "Alice", "Where is A1001 and refund $900 on order A1002")
	e.waitRun(run, models.RunPaused)
	if e.Executions["get_order_status"].Load() != 1 || e.Executions["issue_refund"].Load() != 0 {
		t.Fatal("the allowed call should run at once and the pending one wait")
	}
	e.say(r, run, "Also, where is A1003?")
	e.waitRun(run, models.RunPaused) // stored, answered after the decision
	if _, err := e.Gate.Approve(context.Background(), e.pendingAction(run).ID, approver1, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	e.waitRun(run, models.RunWaiting)
	tr := e.transcript(run)
	for _, want := range []string{"Order A1001 (Trail running shoes, $120.00) is on its way.", "Done: I refunded $900.00 on order A1002", "Order A1003 (Coffee beans, 3 kg, $60.00) is being prepared."} {
		if !strings.Contains(tr, want) {
			t.Fatalf("transcript lacks %q:\n%s", want, tr)
		}
	}
	if i, j := strings.Index(tr, "refunded $900.00"), strings.Index(tr, "Order A1003"); i > j {
		t.Fatalf("the message sent while paused was answered before the result:\n%s", tr)
	}
}

// scripted is a model that says what a test tells it to, turn by turn.
type scripted struct {
	mu      sync.Mutex
	replies []llm.Reply
	errs    []error
	seen    []llm.Request
}

func (s *scripted) Next(_ context.Context, req llm.Request) (llm.Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, req)
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		if err != nil {
			return llm.Reply{}, err
		}
	}
	if len(s.replies) == 0 {
		return llm.Reply{Text: "ok"}, nil
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r, nil
}

func TestCompromisedModelCannotEscapeTheGate(t *testing.T) {
	e := newEnv(t)
	m := &scripted{replies: []llm.Reply{{Calls: []llm.Call{
		{ID: "a", Tool: "issue_refund", Args: json.RawMessage(`{"order_id":"B2001","amount":40}`)},
		{ID: "b", Tool: "issue_refund", Args: json.RawMessage(`{"order_id":"A1001","amount":40,"customer_id":"cus_bob"}`)},
		{ID: "c", Tool: "exec_shell", Args: json.RawMessage(`{"cmd":"rm -rf /"}`)},
		{ID: "d", Tool: "issue_refund", Args: json.RawMessage(`{"order_id":"A1001","amount":40}; DROP TABLE orders`)},
		{ID: "e", Tool: "get_order_status", Args: json.RawMessage(`{"order_id":"B2001"}`)},
	}}, {Text: "done"}}}
	r := e.runner(m)
	run := e.start(r, "cus_alice", "Alice", "hello")
	e.waitRun(run, models.RunWaiting)
	calls, err := e.Store.RunCalls(context.Background(), run)
	if err != nil || len(calls) != 5 {
		t.Fatalf("%d calls recorded: %v", len(calls), err)
	}
	want := map[string]models.CallStatus{"a": models.CallInvalid, "b": models.CallInvalid, "c": models.CallInvalid, "d": models.CallInvalid, "e": models.CallFailed}
	for _, c := range calls {
		if c.Status != want[c.ModelCallID] {
			t.Errorf("call %s (%s %s) is %s, want %s: %s", c.ModelCallID, c.Tool, c.RawArgs, c.Status, want[c.ModelCallID], c.Error)
		}
	}
	if e.Order("B2001").RefundedCents != 0 || e.Order("A1001").RefundedCents != 0 {
		t.Fatal("money moved")
	}
	// The model saw a readable error for each attempt.
	last := m.seen[len(m.seen)-1]
	var results []string
	for _, mt := range last.Turns {
		if mt.Role == "tool" {
			results = append(results, mt.Text)
		}
	}
	if len(results) != 5 || !strings.Contains(strings.Join(results, "\n"), `there is no tool named "exec_shell"`) {
		t.Fatalf("model saw %q", results)
	}
}

func TestFailingModelFailsTheRunAndRetryResumes(t *testing.T) {
	e := newEnv(t)
	m := &scripted{errs: []error{errors.New("provider: 503 after 3 retries")}, replies: []llm.Reply{{Text: "Hello again"}}}
	r := e.runner(m)
	run := e.start(r, "cus_alice", "Alice", "hi")
	got := e.waitRun(run, models.RunFailed)
	if !strings.Contains(got.LastError, "503") {
		t.Fatalf("last error %q", got.LastError)
	}
	if !strings.Contains(e.lastText(run, "system"), "something went wrong") {
		t.Fatal("the customer was not told")
	}
	if _, err := r.Retry(context.Background(), run, auditor); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("auditor retry: %v", err)
	}
	done, err := r.Retry(context.Background(), run, approver1)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	e.waitRun(run, models.RunWaiting)
	if e.lastText(run, "assistant") != "Hello again" {
		t.Fatal(e.transcript(run))
	}
}

func TestLoopGuardStopsAModelThatNeverAnswers(t *testing.T) {
	e := newEnv(t)
	var replies []llm.Reply
	for i := 0; i < 50; i++ {
		replies = append(replies, llm.Reply{Calls: []llm.Call{{ID: "x", Tool: "list_orders", Args: json.RawMessage(`{}`)}}})
	}
	r := e.runner(&scripted{replies: replies})
	run := e.start(r, "cus_alice", "Alice", "hi")
	got := e.waitRun(run, models.RunFailed)
	if !strings.Contains(got.LastError, "loop guard") || e.Executions["list_orders"].Load() != int64(r.MaxStepsPerMessage) {
		t.Fatalf("%q after %d executions", got.LastError, e.Executions["list_orders"].Load())
	}
}

func TestMessageLimits(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	if _, err := r.StartRun(context.Background(), runloop.StartRequest{Message: "   "}); fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("empty: %v", err)
	}
	if _, err := r.StartRun(context.Background(), runloop.StartRequest{Message: strings.Repeat("x", runloop.MaxMessageRunes+1)}); fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("long: %v", err)
	}
}

func TestAnonymousRunIsToldToSignIn(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "", "", "where is A1001?")
	e.waitRun(run, models.RunWaiting)
	if got := e.lastText(run, "assistant"); !strings.Contains(got, "Please sign in to the shop first") {
		t.Fatalf("reply %q", got)
	}
}

func TestClosingARunCancelsItsPendingActions(t *testing.T) {
	e := newEnv(t)
	r := e.runner(offline.Model{})
	run := e.start(r, "cus_alice", "Alice", "refund $900 on order A1002")
	e.waitRun(run, models.RunPaused)
	action := e.pendingAction(run)
	if err := r.CloseRun(context.Background(), run, auditor, ""); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("auditor closes: %v", err)
	}
	if err := r.CloseRun(context.Background(), run, supervisor, "duplicate of another chat"); err != nil {
		t.Fatal(err)
	}
	if c := e.CallRecord(action.ID); c.Status != models.CallCancelled {
		t.Fatalf("action is %s", c.Status)
	}
	got := e.waitRun(run, models.RunClosed)
	if !strings.Contains(e.lastText(run, "system"), "closed by our team") || got.Status != models.RunClosed {
		t.Fatal(e.transcript(run))
	}
	if _, err := r.PostMessage(context.Background(), run, "hello?"); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("message to a closed run: %v", err)
	}
	if e.Executions["issue_refund"].Load() != 0 {
		t.Fatal("a refund of a closed conversation ran")
	}
}

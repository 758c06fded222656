package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// RecordsReport says whether the call rows agree with the audit events.
type RecordsReport struct {
	OK        bool
	Calls     int64
	Approvals int64
	// CallID and Problem name the first disagreement.
	CallID  string
	Problem string
	// Disagreements are all of them (the first models.MaxReportedProblems),
	// each "call <id>: <problem>"; MoreDisagreements counts the rest.
	Disagreements     []string
	MoreDisagreements int
}

// expected is what a call's events say its row must hold.
type expected struct {
	status     models.CallStatus
	argsHash   string
	resultHash string // set by the last outcome event that recorded one
	approvals  int
	created    bool
}

// VerifyRecords replays each call's audit events and compares what they
// say with the row: its status, its arguments' hash, its result's hash and
// its number of verdicts. A row changed without an event, an event whose
// row is gone, or an approval added or removed behind the gate's back shows.
func VerifyRecords(ctx context.Context, store *storage.Store) (RecordsReport, error) {
	var rep RecordsReport
	err := store.EachCallRecord(ctx, func(r *models.CallRecord) error {
		rep.Calls++
		rep.Approvals += int64(len(r.Approvals))
		if problem := checkRecord(r); problem != "" {
			if rep.Problem == "" {
				rep.CallID, rep.Problem = r.ID, problem
			}
			if len(rep.Disagreements) < models.MaxReportedProblems {
				rep.Disagreements = append(rep.Disagreements, "call "+r.ID+": "+problem)
			} else {
				rep.MoreDisagreements++
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.OK = rep.Problem == ""
	return rep, nil
}

func checkRecord(r *models.CallRecord) string {
	if r.Call == nil {
		return "the audit records this call but its row is gone"
	}
	if len(r.Events) == 0 {
		return "the call has a row but no audit event ever recorded it"
	}
	exp, problem := replay(r.Events)
	if problem != "" {
		return problem
	}
	c := r.Call
	switch {
	case c.Status != exp.status:
		return fmt.Sprintf("the row says %s but its audit events say %s", c.Status, exp.status)
	case c.ArgsHash != exp.argsHash:
		return "the row's arguments are not the ones its audit events recorded"
	case exp.resultHash != "" && hashOf(c.Result) != exp.resultHash:
		return "the row's result is not the one its audit events recorded"
	case len(r.Approvals) != exp.approvals:
		return fmt.Sprintf("the call has %s but its audit events record %s", count(len(r.Approvals), "approval row"), count(exp.approvals, "verdict"))
	}
	for _, a := range r.Approvals {
		if a.Verdict != "approve" && a.Verdict != "reject" {
			return fmt.Sprintf("approval %d has the verdict %q", a.ID, a.Verdict)
		}
	}
	return ""
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// CallEventKinds are the kinds of audit event the product writes with a
// call as their subject, each of which replay reads; a test builds a
// database with every one of them and verifies it.
var CallEventKinds = []models.EventKind{
	models.EventCallInvalid, models.EventCallAllowed, models.EventCallDenied, models.EventCallPending,
	models.EventActionEdited, models.EventActionApprovalAdded, models.EventActionApproved, models.EventActionRejected, models.EventActionExpired, models.EventActionCancelled,
	models.EventActionOverdue, models.EventActionReminder, models.EventActionRequirementsRaised,
	models.EventCallExecuting, models.EventCallSucceeded, models.EventCallFailed, models.EventCallUnknown, models.EventCallReconciled,
	models.EventCallInvalidated,
}

// replay reads a call's events in order. The kinds and payloads are those
// the gate writes (agent/gate: call.go, approve.go).
func replay(events []models.AuditEvent) (expected, string) {
	var exp expected
	for _, e := range events {
		var p struct {
			Status     models.CallStatus `json:"status"`
			ArgsHash   string            `json:"args_hash"`
			ToArgsHash string            `json:"to_args_hash"`
			ResultHash string            `json:"result_hash"`
		}
		if err := json.Unmarshal([]byte(e.Payload), &p); err != nil {
			return exp, fmt.Sprintf("audit event %d has a payload that is not JSON", e.Seq)
		}
		switch e.Kind {
		case models.EventCallInvalid:
			exp.created, exp.status = true, models.CallInvalid
		case models.EventCallAllowed, models.EventCallDenied, models.EventCallPending:
			exp.created, exp.status, exp.argsHash = true, p.Status, p.ArgsHash
		case models.EventActionEdited:
			exp.argsHash = p.ToArgsHash
		case models.EventActionOverdue, models.EventActionReminder, models.EventActionRequirementsRaised:
			// Marks on a waiting action (agent/outbox, Gate.RedecidePending):
			// they change neither its status nor its arguments.
		case models.EventActionApprovalAdded:
			exp.approvals++
		case models.EventActionApproved:
			exp.approvals++
			exp.status = models.CallApproved
		case models.EventActionRejected:
			exp.approvals++
			exp.status = models.CallRejected
		case models.EventActionExpired:
			exp.status = models.CallExpired
		case models.EventActionCancelled:
			exp.status = models.CallCancelled
		case models.EventCallExecuting:
			exp.status = models.CallExecuting
		case models.EventCallSucceeded, models.EventCallFailed:
			exp.status, exp.resultHash = p.Status, p.ResultHash
		case models.EventCallUnknown:
			exp.status = models.CallUnknown
		case models.EventCallInvalidated:
			exp.status = models.CallInvalidated
		case models.EventCallReconciled:
			exp.status, exp.resultHash = p.Status, ""
		default:
			return exp, fmt.Sprintf("audit event %d has a kind (%s) no call event has", e.Seq, e.Kind)
		}
		if !exp.created {
			return exp, fmt.Sprintf("audit event %d (%s) comes before the event that recorded the call", e.Seq, e.Kind)
		}
	}
	return exp, ""
}

// count says n of a noun: "1 verdict", "2 verdicts".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

package gate_test

import (
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

func TestQuorum(t *testing.T) {
	t.Parallel()
	ann := gate.Vote{StaffID: "ann", Role: models.Approver}
	ben := gate.Vote{StaffID: "ben", Role: models.Approver}
	sue := gate.Vote{StaffID: "sue", Role: models.Supervisor}
	ada := gate.Vote{StaffID: "ada", Role: models.Admin}
	for _, tc := range []struct {
		name     string
		prior    []gate.Vote
		next     gate.Vote
		required int
		role     models.StaffRole
		count    int
		met      bool
		code     fault.Code // "" when the vote is given
	}{
		{"one approver is enough for one", nil, ann, 1, "", 1, true, ""},
		{"the first of two", nil, ann, 2, "", 1, false, ""},
		{"the second of two", []gate.Vote{ann}, ben, 2, "", 2, true, ""},
		{"the same person twice", []gate.Vote{ann}, ann, 2, "", 1, false, fault.Conflict},
		{"a duplicate earlier vote counts once", []gate.Vote{ann, ann}, ben, 2, "", 2, true, ""},
		{"an approver alone cannot meet a supervisor's action", nil, ann, 1, models.Supervisor, 0, false, fault.Forbidden},
		{"a supervisor can", nil, sue, 1, models.Supervisor, 1, true, ""},
		{"an admin has a supervisor's authority", nil, ada, 1, models.Supervisor, 1, true, ""},
		{"an approver may go first of two with a supervisor", nil, ann, 2, models.Supervisor, 1, false, ""},
		{"a supervisor completes it", []gate.Vote{ann}, sue, 2, models.Supervisor, 2, true, ""},
		{"a supervisor first, an approver completes it", []gate.Vote{sue}, ann, 2, models.Supervisor, 2, true, ""},
		{"two approvers cannot complete a supervisor's pair", []gate.Vote{ann}, ben, 2, models.Supervisor, 1, false, fault.Forbidden},
		{"an auditor decides nothing", nil, gate.Vote{StaffID: "aud", Role: models.Auditor}, 1, "", 0, false, fault.Forbidden},
	} {
		count, met, err := gate.AddVote(tc.prior, tc.next, tc.required, tc.role)
		if fault.CodeOf(err) != tc.code && !(tc.code == "" && err == nil) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.code)
			continue
		}
		if err == nil && (count != tc.count || met != tc.met) {
			t.Errorf("%s: %d approvals, met %v; want %d, %v", tc.name, count, met, tc.count, tc.met)
		}
	}
}

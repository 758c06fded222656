package storage

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// What several accounts signed, for the insights' co-signer check.

// CoSigned is one thing two or more accounts signed: a call that needed
// several approvals, or a policy version (its author counted).
type CoSigned struct {
	Subject string   // a call id, or "policy version N"
	Signers []string // staff ids
}

// CoSignings lists what several accounts signed since a time: calls with
// two or more approvals that needed them, and policy versions with their
// authors (up to 50,000 of each, newest first).
func (s *Store) CoSignings(ctx context.Context, since time.Time) ([]CoSigned, error) {
	db := s.db.WithContext(ctx)
	var calls []struct{ ToolCallID, StaffID string }
	if err := db.Raw(`SELECT a.tool_call_id, a.staff_id FROM approvals a JOIN tool_calls c ON c.id = a.tool_call_id
		WHERE a.verdict = 'approve' AND a.created_at >= ? AND c.required_approvals > 1 ORDER BY a.id DESC LIMIT 50000`, since).Scan(&calls).Error; err != nil {
		return nil, err
	}
	var sigs []struct {
		VersionID int64
		AuthorID  string
		StaffID   string
	}
	if err := db.Raw(`SELECT s.version_id, v.author_id, s.staff_id FROM policy_signatures s JOIN policy_versions v ON v.id = s.version_id
		WHERE s.created_at >= ? ORDER BY s.id DESC LIMIT 50000`, since).Scan(&sigs).Error; err != nil {
		return nil, err
	}
	var out []CoSigned
	at := map[string]int{}
	add := func(subject, who string) {
		if who == "" {
			return
		}
		i, ok := at[subject]
		if !ok {
			i = len(out)
			at[subject] = i
			out = append(out, CoSigned{Subject: subject})
		}
		if !slices.Contains(out[i].Signers, who) {
			out[i].Signers = append(out[i].Signers, who)
		}
	}
	for _, c := range calls {
		add(c.ToolCallID, c.StaffID)
	}
	for _, sg := range sigs {
		subject := fmt.Sprintf("policy version %d", sg.VersionID)
		add(subject, sg.AuthorID)
		add(subject, sg.StaffID)
	}
	return slices.DeleteFunc(out, func(c CoSigned) bool { return len(c.Signers) < 2 }), nil
}

package backoffice

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/pmezard/go-difflib/difflib"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// The back office's side of policy versions (propose on /policy, a page
// per version where admins approve or reject it, a diff between two) and
// of insights, with the suggestions an admin proposes as versions.

func statusWords(s models.PolicyStatus) string { return strings.ReplaceAll(string(s), "_", " ") }

func versionRow(v *versions.Version) views.VersionRow {
	signed := strconv.Itoa(len(v.Signatures))
	if v.AuthorID != "" {
		signed = strconv.Itoa(len(v.Signatures)+1) + " of " + strconv.Itoa(v.PeopleNeeded)
	}
	if v.Status != models.PolicyProposed && v.Status != models.PolicyRejected {
		signed = strings.TrimSuffix(signed, " of "+strconv.Itoa(v.PeopleNeeded))
	}
	return views.VersionRow{ID: strconv.FormatInt(v.ID, 10), Status: statusWords(v.Status), Hash: v.Hash, Author: v.Author, Source: v.Source,
		Note: v.Note, Created: clock(v.CreatedAt), Signed: signed, InForce: v.Status == models.PolicyInForce, Proposed: v.Status == models.PolicyProposed}
}

// versionsInto fills the policy page's versions.
func (s *Office) versionsInto(ctx context.Context, v *views.PolicyView) {
	if s.core.Versions == nil {
		return
	}
	all, err := s.core.Versions.List(ctx)
	if err != nil {
		s.cfg.Log.Error("read the policy versions", "err", err)
		return
	}
	v.People, v.SinglePerson = s.core.Versions.People(), s.core.Versions.People() == 1
	for _, pv := range all {
		v.Versions = append(v.Versions, versionRow(pv))
		if pv.Status == models.PolicyInForce {
			v.InForceID = strconv.FormatInt(pv.ID, 10)
		}
	}
	if v.ProposeYAML == "" {
		v.ProposeYAML = v.YAML
	}
}

// policyPropose is POST /policy/versions (admins): the edited policy, or
// an uploaded file, is proposed; a refusal shows the policy page again
// with the loader's words (line and column) and what was proposed.
func (s *Office) policyPropose(c echo.Context) error {
	yaml, source := c.FormValue("yaml"), "page"
	if fh, err := c.FormFile("file"); err == nil && fh.Size > 0 {
		if fh.Size > versions.MaxYAML {
			return s.proposeRefused(c, yaml, fault.Errorf(fault.Invalid, "the uploaded file is over 256 KiB"))
		}
		f, err := fh.Open()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(f, versions.MaxYAML+1))
		f.Close()
		if err != nil {
			return err
		}
		yaml, source = string(b), "upload "+fh.Filename
	}
	v, err := s.core.Versions.Propose(c.Request().Context(), versions.Proposal{YAML: []byte(yaml), Note: c.FormValue("note"), Source: source,
		By: currentStaff(c).staff.Actor()})
	if err != nil {
		return s.proposeRefused(c, yaml, err)
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.Reverse(views.PathPolicyVersion, strconv.FormatInt(v.ID, 10)), "done=proposed"))
}

func (s *Office) proposeRefused(c echo.Context, yaml string, err error) error {
	if code := fault.CodeOf(err); code == fault.Internal {
		return err
	}
	v := s.policyView(c)
	v.ProposeYAML, v.ProposeNote, v.ProposeError = yaml, c.FormValue("note"), fault.Message(err)
	status := doorkit.HTTPStatus(fault.CodeOf(err))
	if fault.CodeOf(err) == fault.Invalid {
		status = http.StatusUnprocessableEntity
	}
	return render(c, status, views.Policy(v))
}

var versionFlash = map[string]string{"proposed": "Proposed. Another admin approves it here; until then the version before stays in force.",
	"approved": "Approved. It is in force once enough people signed.", "in_force": "In force on every instance.",
	"rejected": "Rejected."}

func (s *Office) policyVersionPage(c echo.Context) error {
	v, err := s.versionView(c)
	if err != nil {
		return err
	}
	v.Flash = versionFlash[c.QueryParam("done")]
	return render(c, http.StatusOK, views.PolicyVersionPage(v))
}

func (s *Office) versionView(c echo.Context) (views.VersionPageView, error) {
	vs, err := s.versionsOn()
	if err != nil {
		return views.VersionPageView{}, err
	}
	id, err := versions.ParseID(c.Param("id"))
	if err != nil {
		return views.VersionPageView{}, err
	}
	pv, err := vs.Get(c.Request().Context(), id)
	if err != nil {
		return views.VersionPageView{}, err
	}
	v := views.VersionPageView{PasskeyURL: s.versionPasskeyURL(pv.ID), Version: versionRow(pv), YAML: pv.YAML, PeopleNeeded: pv.PeopleNeeded, SinglePerson: pv.PeopleNeeded == 1,
		ReplayDigest: pv.ReplayDigest, Reason: pv.Reason, EndedBy: models.ActorName(pv.EndedBy)}
	for _, t := range pv.Tests.Results {
		v.Tests = append(v.Tests, views.PolicyTestView{Name: t.Name, Passed: t.Passed, Problem: t.Problem})
	}
	if pv.Replay != nil {
		v.Replay = replayView(*pv.Replay)
	} else {
		v.ReplayNote = "Not replayed: it was the first version of this database, or a policy file that rules (--policy-from-file)."
	}
	seen := map[string]bool{}
	if pv.AuthorID != "" {
		seen[pv.AuthorID] = true
	}
	for _, sg := range pv.Signatures {
		seen[sg.StaffID] = true
		v.Signatures = append(v.Signatures, views.SignatureRow{Name: sg.Name, Note: sg.Note, At: clock(sg.At), PersonURL: personURL(sg.StaffID)})
	}
	v.SignedBy = len(seen)
	if pv.InForceAt != nil {
		v.InForceAt = clock(*pv.InForceAt)
	}
	if pv.EndedAt != nil {
		v.Ended = clock(*pv.EndedAt)
	}
	if pv.BaseID > 0 {
		v.BaseID = strconv.FormatInt(pv.BaseID, 10)
	}
	me := currentStaff(c).staff
	switch {
	case pv.AuthorID == me.ID && pv.PeopleNeeded > 1:
		v.WhyNot = "You proposed this version: another admin approves it."
	case seenBy(pv, me.ID):
		v.WhyNot = "You approved it already; it waits for another admin."
	default:
		v.MayApprove = true
	}
	return v, nil
}

func seenBy(v *versions.Version, staffID string) bool {
	for _, sg := range v.Signatures {
		if sg.StaffID == staffID {
			return true
		}
	}
	return false
}

func replayView(rep gate.Replay) *views.ReplayView {
	rv := &views.ReplayView{From: clock(rep.Since), Calls: rep.Calls, Unchanged: rep.Unchanged, Changed: rep.Calls - rep.Unchanged - rep.Failed,
		Failed: rep.Failed, FirstFail: rep.FirstFail}
	for _, ch := range rep.Changes {
		cv := views.ReplayChangeView{Tool: ch.Tool, From: ch.From, FromRule: ch.FromRule, To: ch.To, ToRule: ch.ToRule, Count: ch.Count}
		for _, ex := range ch.Examples {
			cv.Examples = append(cv.Examples, views.ReplayExampleView{ID: ex.ID, Summary: ex.Summary})
		}
		rv.Changes = append(rv.Changes, cv)
	}
	return rv
}

// policyVersionDecide is POST /policy/versions/:id/approve or /reject
// (admins).
func (s *Office) policyVersionDecide(approve bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := versions.ParseID(c.Param("id"))
		if err != nil {
			return err
		}
		by := currentStaff(c).staff.Actor()
		var v *versions.Version
		done := "rejected"
		if approve {
			var sig *models.PasskeySignature
			if sig, err = s.signature(c, s.versionDecision); err == nil {
				v, err = s.core.Versions.Approve(c.Request().Context(), id, versions.Approval{By: by, Note: c.FormValue("note"),
					ReplayDigest: c.FormValue("replay_digest"), Passkey: sig})
			}
			done = "approved"
			if err == nil && v.Status == models.PolicyInForce {
				done = "in_force"
			}
		} else {
			v, err = s.core.Versions.Reject(c.Request().Context(), id, by, c.FormValue("reason"))
		}
		if err != nil {
			if fault.CodeOf(err) == fault.Internal || fault.CodeOf(err) == fault.NotFound {
				return err
			}
			page, verr := s.versionView(c)
			if verr != nil {
				return verr
			}
			page.Error = sentence(fault.Message(err))
			return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.PolicyVersionPage(page))
		}
		return c.Redirect(http.StatusSeeOther, views.WithQuery(views.Reverse(views.PathPolicyVersion, strconv.FormatInt(v.ID, 10)), "done="+done))
	}
}

// policyDiff is GET /policy/diff?from=&to=: a unified diff of two
// versions' YAML.
func (s *Office) policyDiff(c echo.Context) error {
	vs, err := s.versionsOn()
	if err != nil {
		return err
	}
	v := views.DiffView{From: c.QueryParam("from"), To: c.QueryParam("to")}
	read := func(s string) (*versions.Version, error) {
		id, err := versions.ParseID(s)
		if err != nil {
			return nil, err
		}
		return vs.Get(c.Request().Context(), id)
	}
	from, err := read(v.From)
	if err != nil {
		return err
	}
	to, err := read(v.To)
	if err != nil {
		return err
	}
	if from.Hash == to.Hash {
		v.Same = true
		return render(c, http.StatusOK, views.PolicyDiffPage(v))
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(from.YAML), B: difflib.SplitLines(to.YAML),
		FromFile: "version " + v.From, ToFile: "version " + v.To, Context: 3})
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		kind := ""
		switch {
		case strings.HasPrefix(line, "@@"):
			kind = "hunk"
		case strings.HasPrefix(line, "+"):
			kind = "add"
		case strings.HasPrefix(line, "-"):
			kind = "del"
		}
		v.Lines = append(v.Lines, views.DiffLine{Kind: kind, Text: line})
	}
	return render(c, http.StatusOK, views.PolicyDiffPage(v))
}

func fmtSeconds(x *float64) string {
	if x == nil {
		return "–"
	}
	return strconv.FormatFloat(*x, 'f', -1, 64) + " s"
}

func fmtShare(x float64) string { return strconv.FormatFloat(x*100, 'f', 0, 64) + "%" }

func count(n int64) string { return strconv.FormatInt(n, 10) }

// freshness says how fresh the counts of past hours are.
func freshness(at *time.Time) string {
	switch {
	case at == nil:
		return ""
	case at.IsZero():
		return "Calls of past hours are not all counted yet: the audit log has not been read to its end since this database was made. This hour's calls are counted as they happen."
	}
	return "Calls of past hours counted as of " + at.UTC().Format("2006-01-02 15:04:05") + " UTC; this hour's are counted as they happen."
}

// insightsPage is GET /insights (auditors, supervisors, admins).
func (s *Office) insightsPage(c echo.Context) error {
	q, since, err := insightsQuery(c)
	v := views.InsightsView{Since: since, Tool: q.Tool, Field: q.Field, Bands: c.QueryParam("bands"), MayAdopt: mayAdmin(currentStaff(c).staff.Role)}
	if err != nil {
		v.Error = sentence(fault.Message(err))
		return render(c, http.StatusBadRequest, views.InsightsPage(v))
	}
	rep, err := s.readInsights(c, q)
	if err != nil {
		return err
	}
	v.Fresh = freshness(rep.CountedAt)
	for _, r := range rep.Rules {
		v.Rules = append(v.Rules, views.InsightRuleRow{Tool: r.Tool, Rule: r.Rule, Band: r.Band, Calls: count(r.Calls), Allowed: count(r.Allowed),
			Denied: count(r.Denied), Held: count(r.Held), Approved: count(r.Approved), Edited: count(r.Edited), Rejected: count(r.Rejected),
			Expired: count(r.Expired), Waiting: count(r.Waiting), P50: fmtSeconds(r.P50), P90: fmtSeconds(r.P90)})
	}
	for _, a := range rep.Approvers {
		v.Approvers = append(v.Approvers, views.ApproverRow{Name: a.Name, Decisions: count(a.Decisions), ShareApproved: fmtShare(a.ShareApproved),
			Under3s: fmt.Sprintf("%d (%s)", a.Under3s, fmtShare(a.ShareUnder3s)), Median: fmtSeconds(a.MedianS),
			RubberStamp: a.Decisions >= 10 && a.ShareUnder3s >= 0.5})
	}
	for _, p := range rep.Vouched {
		v.Vouched = append(v.Vouched, views.VouchedRow{Proposer: p.ProposerName, ProposerURL: personURL(p.ProposerID), Proposed: p.ProposedName,
			ProposedURL: personURL(p.ProposedID), Via: p.Via, Together: p.Together, Examples: p.Examples})
	}
	for _, sg := range rep.Suggestions {
		row := views.SuggestionRow{ID: sg.ID, Text: sg.Text, Warning: sg.Warning, TestsFail: sg.TestsFail, YAML: sg.YAML, Calls: sg.Evidence.CallsTotal}
		row.Examples = sg.Evidence.Calls[:min(5, len(sg.Evidence.Calls))]
		v.Suggestions = append(v.Suggestions, row)
	}
	return render(c, http.StatusOK, views.InsightsPage(v))
}

// suggestionAdopt is POST /insights/suggestions/:id/adopt (admins): the
// suggestion is found again over the same period and its draft proposed
// as a version, replayed like any other. A draft whose tests fail opens
// the policy page's proposal, to edit.
func (s *Office) suggestionAdopt(c echo.Context) error {
	q, _, err := insightsQuery(c)
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(c.FormValue("since")); s != "" {
		c.QueryParams().Set("since", s)
		if q, _, err = insightsQuery(c); err != nil {
			return err
		}
	}
	rep, err := s.readInsights(c, q)
	if err != nil {
		return err
	}
	for _, sg := range rep.Suggestions {
		if sg.ID != c.Param("id") {
			continue
		}
		v, err := s.core.Versions.Propose(c.Request().Context(), versions.Proposal{YAML: []byte(sg.YAML), Note: sg.Text + " " + sg.Warning,
			Source: "suggestion " + sg.ID, By: currentStaff(c).staff.Actor()})
		if err != nil {
			pv := s.policyView(c)
			pv.ProposeYAML, pv.ProposeNote, pv.ProposeError, pv.ProposeOpen = sg.YAML, sg.Text, fault.Message(err), true
			if fault.CodeOf(err) == fault.Internal {
				return err
			}
			return render(c, http.StatusUnprocessableEntity, views.Policy(pv))
		}
		return c.Redirect(http.StatusSeeOther, views.WithQuery(views.Reverse(views.PathPolicyVersion, strconv.FormatInt(v.ID, 10)), "done=proposed"))
	}
	return fault.Errorf(fault.NotFound, "that suggestion is no longer made: the history or the policy changed since")
}

// versionDecision is what approving a policy version signs: its text's
// hash.
func (s *Office) versionDecision(c echo.Context) (accounts.Decision, error) {
	id, err := versions.ParseID(c.Param("id"))
	if err != nil {
		return accounts.Decision{}, err
	}
	v, err := s.core.Versions.Get(c.Request().Context(), id)
	if err != nil {
		return accounts.Decision{}, err
	}
	return accounts.Decision{CallID: models.PolicySubject(id), ArgsHash: v.Hash, Verdict: "approve",
		Summary: "put policy version " + strconv.FormatInt(id, 10) + " in force"}, nil
}

func (s *Office) versionPasskeyURL(id int64) string {
	if !s.core.Accounts.SignWithPasskey {
		return ""
	}
	return views.Reverse(views.PathPolicyVersionPasskey, strconv.FormatInt(id, 10))
}

package backoffice

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

func (s *Office) policyPage(c echo.Context) error {
	return render(c, http.StatusOK, views.Policy(s.policyView(c)))
}

// maxCandidatePolicy bounds a policy pasted into /policy.
const maxCandidatePolicy = 256 << 10

// policyReplay is POST /policy/replay (admins): the candidate policy decides
// again the calls recorded over the period asked for, and the page shows
// what would change. Nothing is changed.
func (s *Office) policyReplay(c echo.Context) error {
	v := s.policyView(c)
	v.Candidate, v.Since = c.FormValue("policy"), strings.TrimSpace(c.FormValue("since"))
	if v.Since == "" {
		v.Since = "720h"
	}
	period, err := time.ParseDuration(v.Since)
	switch {
	case err != nil || period <= 0:
		v.ReplayError = "The period is a duration such as 720h (30 days) or 24h."
	case strings.TrimSpace(v.Candidate) == "":
		v.ReplayError = "Paste a candidate policy to replay."
	case len(v.Candidate) > maxCandidatePolicy:
		v.ReplayError = "The candidate policy is over 256 KiB."
	}
	if v.ReplayError != "" {
		return render(c, http.StatusUnprocessableEntity, views.Policy(v))
	}
	reg := s.core.Gate.Tools()
	candidate, err := policy.LoadPolicy([]byte(v.Candidate), "candidate", reg)
	if err != nil {
		v.ReplayError = "The candidate policy: " + strings.TrimPrefix(err.Error(), "policy candidate: ")
		return render(c, http.StatusUnprocessableEntity, views.Policy(v))
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 60*time.Second)
	defer cancel()
	from := time.Now().Add(-period).UTC()
	rep, err := gate.ReplayPolicy(ctx, s.core.Store, reg, candidate, from)
	if err != nil {
		return err
	}
	v.Replay = replayView(rep)
	return render(c, http.StatusOK, views.Policy(v))
}

func (s *Office) policyView(c echo.Context) views.PolicyView {
	p := s.core.Gate.Policy()
	v := views.PolicyView{Source: "a Go policy", Version: p.Version()}
	if fp, ok := p.(*policy.FilePolicy); ok {
		v.Source, v.YAML = fp.Source, fp.YAML()
		rules, defaults := fp.Rules()
		conv := func(r policy.RuleInfo) views.RuleView {
			return views.RuleView{Name: r.Name, Description: r.Description, Tool: r.Tool, Risk: r.Risk, When: r.When, WhenWords: r.WhenWords,
				Decision: r.Decision, Reason: r.Reason, ReasonWords: r.ReasonWords, Role: r.Role, Expires: r.Expires, Approvals: r.Approvals}
		}
		for _, t := range fp.Totals() {
			v.Totals = append(v.Totals, views.TotalView{Name: t.Name, Description: t.Description, Tool: t.Tool, Sum: t.Sum, Same: t.Same, Within: t.Within})
		}
		for _, r := range rules {
			v.Rules = append(v.Rules, conv(r))
		}
		for _, r := range defaults {
			v.Defaults = append(v.Defaults, conv(r))
		}
		for _, t := range fp.RunTests(c.Request().Context()) {
			v.Tests = append(v.Tests, views.PolicyTestView{Name: t.Name, Passed: t.Passed, Problem: t.Problem})
		}
	}
	if sp, seen := s.core.Gate.Shadow(); sp != nil {
		sv := &views.ShadowView{Source: "a Go policy", Version: sp.Version(), Seen: seen}
		if fp, ok := sp.(*policy.FilePolicy); ok {
			sv.Source = fp.Source
		}
		counts, err := s.core.Store.ShadowDisagreements(c.Request().Context(), sp.Version())
		if err != nil {
			s.cfg.Log.Error("read the shadow policy's disagreements", "err", err)
		}
		for _, ct := range counts {
			cv := views.ReplayChangeView{From: ct.Decided, To: ct.Shadow, Count: int(ct.Count)}
			for _, id := range ct.Examples {
				cv.Examples = append(cv.Examples, views.ReplayExampleView{ID: id})
			}
			sv.Disagreed = append(sv.Disagreed, cv)
		}
		v.Shadow = sv
	}
	v.Instances, v.LastReloadFailed = s.instanceRows(c.Request().Context())
	s.versionsInto(c.Request().Context(), &v)
	v.Grants = s.grantRows(c)
	if c.QueryParam("done") == "grant_revoked" {
		v.GrantFlash = "Revoked. Later calls it covered wait for a person again."
	}
	return v
}

func (s *Office) toolsPage(c echo.Context) error {
	return render(c, http.StatusOK, views.Tools(s.toolsView(c)))
}

func (s *Office) toolsView(c echo.Context) views.ToolsView {
	v := views.ToolsView{Unaccepted: s.unacceptedRows(c), MayAccept: mayAdmin(currentStaff(c).staff.Role)}
	if name := c.QueryParam("accepted"); name != "" {
		v.Flash = "Accepted the definition of " + name + ": calls of it are decided by its own risk again."
	}
	held := map[string]bool{}
	for _, u := range v.Unaccepted {
		held[u.Name] = true
	}
	for _, t := range s.core.Gate.Tools().All() {
		v.Tools = append(v.Tools, views.ToolDetail{Name: t.Name, Risk: string(t.Risk), Description: t.Description, Origin: t.Origin,
			Schema: prettyJSON(string(t.Schema)), Idempotent: t.Idempotent, Held: held[t.Name]})
	}
	if s.cfg.Upstreams != nil {
		for _, u := range s.cfg.Upstreams() {
			v.Upstreams = append(v.Upstreams, views.UpstreamRow{Name: u.Name, Via: u.Via, Connected: u.Connected, Since: clock(u.Since),
				Error: u.Error, Tools: u.Tools, Skipped: u.Skipped, Beside: besideTools(u), Off: strings.Join(u.Off, ", "), Relay: relayWords(u), Revisions: revisionWords(u),
				Unlisted: string(u.Unlisted), UnlistedNames: unlistedNames(u)})
		}
	}
	return v
}

// unlistedNames says which names a call to a tool an MCP server does not
// list may have to reach it.
func unlistedNames(u tools.UpstreamStatus) string {
	if u.Prefix == "" {
		return "any name no other tool has"
	}
	return "named " + u.Prefix + "…"
}

// besideTools says what an MCP server offers besides tools ("" if nothing).
func besideTools(u tools.UpstreamStatus) string {
	var parts []string
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, strconv.Itoa(n)+" "+many)
		}
	}
	count(u.Prompts, "prompt", "prompts")
	count(u.Resources, "resource", "resources")
	count(u.Templates, "resource template", "resource templates")
	if u.Completions {
		parts = append(parts, "completions")
	}
	return strings.Join(parts, ", ")
}

func (s *Office) staffView(c echo.Context) (views.StaffView, error) {
	all, err := s.core.Store.AllStaff(c.Request().Context())
	if err != nil {
		return views.StaffView{}, err
	}
	tokens, err := s.core.Store.APITokenCounts(c.Request().Context())
	if err != nil {
		return views.StaffView{}, err
	}
	agents, err := s.core.Store.Agents(c.Request().Context())
	if err != nil {
		return views.StaffView{}, err
	}
	me := currentStaff(c).staff.ID
	v := views.StaffView{Roles: names(models.StaffRoles), NewRole: string(models.Approver)}
	for _, a := range agents {
		state := "works"
		if a.RevokedAt != nil {
			state = "revoked " + clock(*a.RevokedAt)
		}
		limit := func(n int) string {
			if n == 0 {
				return ""
			}
			return strconv.Itoa(n)
		}
		v.Agents = append(v.Agents, views.AgentRow{Name: a.Name, Added: clock(a.CreatedAt), State: state, Live: a.RevokedAt == nil,
			CallsPerSecond: limit(a.CallsPerSecond), CallBurst: limit(a.CallBurst), MaxWaiting: limit(a.MaxWaiting)})
	}
	links, err := s.core.Store.StaffLinks(c.Request().Context())
	if err != nil {
		return views.StaffView{}, err
	}
	channels := s.core.Outbox.Links()
	for _, l := range channels {
		v.Links = append(v.Links, l.Label)
	}
	for _, st := range all {
		var cells []views.StaffLinkCell
		for _, l := range channels {
			cells = append(cells, views.StaffLinkCell{Channel: l.Channel, Label: l.Label, Example: l.Example, Address: links[st.ID][l.Channel],
				URL: views.Reverse(views.PathStaffLink, st.ID, l.Channel)})
		}
		v.Rows = append(v.Rows, views.StaffRow{ID: st.ID, Email: st.Email, Name: st.Name, Role: string(st.Role), Disabled: st.Disabled, Self: st.ID == me,
			Tokens: tokens[st.ID], Links: cells, Origin: originWords(st.Origin), Host: st.Origin == models.OriginHost, Demo: st.Origin == models.OriginDemo,
			PersonURL: views.Reverse(views.PathPerson, st.ID), NoPassword: st.PasswordHash == ""})
	}
	if err := s.staffChangesInto(c, &v); err != nil {
		return views.StaffView{}, err
	}
	if v.Deliveries, err = s.deliveryRows(c); err != nil {
		return views.StaffView{}, err
	}
	if v.OAuthClients, err = s.oauthClientRows(c, agents, all); err != nil {
		return views.StaffView{}, err
	}
	if s.core.Outbox != nil {
		v.Reaching = strings.Join(s.core.Outbox.Channels(), ", ")
	}
	return v, nil
}

// deliveryRows is the delivery log: the latest 50, newest first.
func (s *Office) deliveryRows(c echo.Context) ([]views.DeliveryRow, error) {
	ds, err := s.core.Store.Deliveries(c.Request().Context(), 50)
	if err != nil {
		return nil, err
	}
	rows := make([]views.DeliveryRow, 0, len(ds))
	for _, d := range ds {
		r := views.DeliveryRow{ID: strconv.FormatInt(d.ID, 10), At: clock(d.CreatedAt), Channel: d.Channel, Target: d.Target,
			Event: d.Event, About: d.Subject, Status: string(d.Status), Attempts: strconv.Itoa(d.Attempts), LastError: d.LastError}
		switch {
		case strings.HasPrefix(d.Subject, "call_"):
			r.AboutURL = views.ActionPath(d.Subject)
		case strings.HasPrefix(d.Subject, "run_"):
			r.AboutURL = views.RunPath(d.Subject)
		}
		if d.Status == models.DeliveryQueued && d.Attempts > 0 {
			r.NextTry = clock(d.NextAt)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// staffLink sets an account's address on a channel that links people to
// accounts (Slack's user id), as the channel checks it.
func (s *Office) staffLink(c echo.Context) error {
	i := slices.IndexFunc(s.core.Outbox.Links(), func(l outbox.Link) bool { return l.Channel == c.Param("channel") })
	if i < 0 {
		return fault.Errorf(fault.NotFound, "no channel %q links people to accounts here", c.Param("channel"))
	}
	l := s.core.Outbox.Links()[i]
	if err := s.core.Accounts.Link(c.Request().Context(), c.Param("id"), l.Channel, c.FormValue("address"), l.Check, currentStaff(c).staff.Actor()); err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		v, verr := s.staffView(c)
		if verr != nil {
			return verr
		}
		v.FlashError = sentence(fault.Message(err))
		return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.StaffPage(v))
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=link"))
}

var staffFlash = map[string]string{
	"proposed":        "Proposed. It takes effect when another admin approves it (below, under Changes waiting).",
	"signed":          "Approved. It takes effect when enough admins have signed.",
	"change-done":     "Done: the change is in effect. A new account, or a reset one, gets a one-time link to set its own password.",
	"change-rejected": "Rejected: the change will not take effect.",
	"disabled":        "Account disabled; their sessions, API tokens and enrollment links were ended at once.",
	"tokens":          "Their staff API tokens were revoked; the account and its sessions are unchanged.",
	"link":            "Saved: a decision from that address acts as this account.", "oauth-revoked": "The MCP client was revoked; its tokens ended at once."}

func (s *Office) staffPage(c echo.Context) error {
	v, err := s.staffView(c)
	if err != nil {
		return err
	}
	v.Flash = staffFlash[c.QueryParam("done")]
	return render(c, http.StatusOK, views.StaffPage(v))
}

func (s *Office) staffRevokeTokens(c echo.Context) error {
	if _, err := s.core.Accounts.RevokeStaffTokens(c.Request().Context(), c.Param("id"), currentStaff(c).staff.Actor()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=tokens"))
}

// agentLimits is POST /staff/agents/:name/limits: an agent's own limits.
func (s *Office) agentLimits(c echo.Context) error {
	num := func(field string) (int, error) {
		v := strings.TrimSpace(c.FormValue(field))
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fault.Errorf(fault.Invalid, "%s is not a whole number", strings.ReplaceAll(field, "_", " "))
		}
		return n, nil
	}
	var l models.AgentLimits
	var err error
	if l.CallsPerSecond, err = num("calls_per_second"); err == nil {
		if l.CallBurst, err = num("call_burst"); err == nil {
			l.MaxWaiting, err = num("max_waiting")
		}
	}
	if err == nil {
		err = s.core.Accounts.SetAgentLimits(c.Request().Context(), c.Param("id"), l, currentStaff(c).staff.Actor())
	}
	if err != nil {
		return s.staffFail(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=limits"))
}

// revisionWords says which MCP revisions a connected server is spoken to
// at (tools/upstream/modern.go).
func revisionWords(u tools.UpstreamStatus) string {
	switch {
	case !u.Connected:
		return ""
	case !u.Modern:
		return "Spoken to at MCP 2025-11-25; clients of 2026-07-28 are answered from that session."
	}
	w := "Spoken to at MCP 2025-11-25 and 2026-07-28: each client is offered what the server lists at the client's revision, and its calls, prompts and reads go to the server at that revision."
	tools := func(n int) string {
		if n == 1 {
			return "1 tool"
		}
		return strconv.Itoa(n) + " tools"
	}
	var only []string
	if u.ModernOnly > 0 {
		only = append(only, tools(u.ModernOnly)+" listed at 2026-07-28 only")
	}
	if u.LegacyOnly > 0 {
		only = append(only, tools(u.LegacyOnly)+" listed at 2025-11-25 only")
	}
	if len(only) > 0 {
		w += " " + strings.Join(only, ", ") + "."
	}
	return w
}

// relayWords says where what an MCP server says and asks during a call
// goes (tools/upstream/relay.go).
func relayWords(u tools.UpstreamStatus) string {
	if u.OverHTTP {
		return "During an allowed call, its progress, log messages and requests to the client (sampling, elicitation, roots) go to the agent that made the call (known by the call's own stream)."
	}
	return "During an allowed call, its progress goes to the agent that made the call; over stdio nothing says which call a log message or a request is for, so it is offered no sampling, elicitation or roots, what it logs stays in Countersign's log and what it asks is refused."
}

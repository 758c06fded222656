package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
)

func (s *Server) policyPage(c echo.Context) error {
	p := s.cfg.Gate.Policy()
	v := views.PolicyView{Source: "a Go policy", Version: p.Version()}
	if fp, ok := p.(*policy.FilePolicy); ok {
		v.Source = fp.Source
		rules, defaults := fp.Rules()
		conv := func(r policy.RuleInfo) views.RuleView {
			return views.RuleView{Name: r.Name, Tool: r.Tool, Risk: r.Risk, When: r.When, Decision: r.Decision, Reason: r.Reason,
				Role: r.Role, Expires: r.Expires, Approvals: r.Approvals}
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
	return render(c, http.StatusOK, views.Policy(v))
}

func (s *Server) toolsPage(c echo.Context) error {
	var v views.ToolsView
	for _, t := range s.cfg.Gate.Tools().All() {
		v.Tools = append(v.Tools, views.ToolDetail{Name: t.Name, Risk: string(t.Risk), Description: t.Description, Origin: t.Origin,
			Schema: prettyJSON(string(t.Schema)), Idempotent: t.Idempotent})
	}
	if s.cfg.Upstreams != nil {
		for _, u := range s.cfg.Upstreams() {
			v.Upstreams = append(v.Upstreams, views.UpstreamRow{Name: u.Name, Via: u.Via, Connected: u.Connected, Since: clock(u.Since),
				Error: u.Error, Tools: u.Tools, Skipped: u.Skipped})
		}
	}
	return render(c, http.StatusOK, views.Tools(v))
}

func (s *Server) staffView(c echo.Context) (views.StaffView, error) {
	all, err := s.cfg.Store.AllStaff(c.Request().Context())
	if err != nil {
		return views.StaffView{}, err
	}
	tokens, err := s.cfg.Store.APITokenCounts(c.Request().Context())
	if err != nil {
		return views.StaffView{}, err
	}
	agents, err := s.cfg.Store.Agents(c.Request().Context())
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
		v.Agents = append(v.Agents, views.AgentRow{Name: a.Name, Added: clock(a.CreatedAt), State: state})
	}
	for _, st := range all {
		v.Rows = append(v.Rows, views.StaffRow{ID: st.ID, Email: st.Email, Name: st.Name, Role: string(st.Role), Disabled: st.Disabled, Self: st.ID == me,
			Tokens: tokens[st.ID]})
	}
	return v, nil
}

var staffFlash = map[string]string{"added": "Account added.", "role": "Role changed; their open sessions were ended.", "disabled": "Account disabled; their sessions and API tokens were ended at once.", "enabled": "Account enabled.",
	"tokens": "Their staff API tokens were revoked; the account and its sessions are unchanged."}

func (s *Server) staffPage(c echo.Context) error {
	v, err := s.staffView(c)
	if err != nil {
		return err
	}
	v.Flash = staffFlash[c.QueryParam("done")]
	return render(c, http.StatusOK, views.StaffPage(v))
}

func (s *Server) staffAdd(c echo.Context) error {
	_, err := s.cfg.Accounts.AddStaff(c.Request().Context(), c.FormValue("email"), c.FormValue("name"), models.StaffRole(c.FormValue("role")),
		c.FormValue("password"), currentStaff(c).staff.Actor())
	if err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		v, verr := s.staffView(c)
		if verr != nil {
			return verr
		}
		v.FlashError, v.NewEmail, v.NewName, v.NewRole = sentence(fault.Message(err)), c.FormValue("email"), c.FormValue("name"), c.FormValue("role")
		return render(c, statusForCode(fault.CodeOf(err)), views.StaffPage(v))
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=added"))
}

func (s *Server) staffRevokeTokens(c echo.Context) error {
	if _, err := s.cfg.Accounts.RevokeStaffTokens(c.Request().Context(), c.Param("id"), currentStaff(c).staff.Actor()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=tokens"))
}

func (s *Server) staffRole(c echo.Context) error {
	if err := s.cfg.Accounts.SetRole(c.Request().Context(), c.Param("id"), models.StaffRole(c.FormValue("role")), currentStaff(c).staff.Actor()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=role"))
}

func (s *Server) staffDisabled(c echo.Context) error {
	disabled := strings.EqualFold(c.FormValue("disabled"), "true")
	if err := s.cfg.Accounts.SetDisabled(c.Request().Context(), c.Param("id"), disabled, currentStaff(c).staff.Actor()); err != nil {
		return err
	}
	if disabled {
		return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=disabled"))
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=enabled"))
}

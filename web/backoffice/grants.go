package backoffice

import (
	"cmp"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// grantsEndedShown is how long an ended grant stays listed on /policy.
const grantsEndedShown = 7 * 24 * time.Hour

// maySupervise: reconcile calls, give and revoke standing grants.
func maySupervise(r models.StaffRole) bool { return r.AtLeast(models.Supervisor) }

// grantFromForm reads the standing grant the approve form asks for (nil:
// none asked).
func grantFromForm(form func(string) string) (*gate.GrantRequest, error) {
	if form("grant") != "1" {
		return nil, nil
	}
	g := &gate.GrantRequest{Note: form("note")}
	if u := strings.TrimSpace(form("grant_uses")); u != "" {
		n, err := strconv.Atoi(u)
		if err != nil || n < 1 {
			return nil, fault.Errorf(fault.Invalid, "the number of calls a grant allows is a whole number from 1 to 1000")
		}
		g.Uses = n
	}
	if a := strings.TrimSpace(form("grant_amount")); a != "" {
		f, err := strconv.ParseFloat(a, 64)
		c, merr := models.CentsFrom(f)
		if err != nil || merr != nil || c <= 0 {
			return nil, fault.Errorf(fault.Invalid, "the grant's total amount is a sum such as 250 or 99.50")
		}
		g.Amount = c
	}
	var err error
	if g.For, err = time.ParseDuration(form("grant_for")); err != nil {
		return nil, fault.Errorf(fault.Invalid, "choose how long the grant lasts")
	}
	return g, nil
}

// grantOffer is what the approve form offers to grant on a call, or nil
// when a grant cannot be given with its approval.
func (s *Office) grantOffer(call *models.ToolCall, run *models.Run) *views.GrantOffer {
	if call.Status != models.CallPending || call.RequiredApprovals > 1 || run.CustomerID == "" {
		return nil
	}
	tool, ok := s.core.Gate.Tools().Get(call.Tool)
	if !ok {
		return nil
	}
	o := &views.GrantOffer{Customer: customerLabel(run.CustomerID, run.CustomerName), Tool: call.Tool, Amount: tool.Amount != "",
		Uses: "3", For: "24h"}
	if each, ok := tool.AmountOf(call.Args); ok && each > 0 {
		o.Each = each.String()
	}
	return o
}

// keepGrantTyped puts back what the person typed in the grant fields when
// the form comes back with an error.
func keepGrantTyped(c echo.Context, o *views.GrantOffer) {
	if o == nil || c.FormValue("grant") != "1" {
		return
	}
	o.Open, o.Uses, o.Total, o.For = true, c.FormValue("grant_uses"), c.FormValue("grant_amount"), c.FormValue("grant_for")
}

// grantGivenMessage is the flash after an approval that gave a grant.
func (s *Office) grantGivenMessage(c echo.Context, call *models.ToolCall) string {
	id := c.QueryParam("grant")
	if id == "" {
		return ""
	}
	g, err := s.core.Store.Grant(c.Request().Context(), id)
	if err != nil || g.SourceCallID != call.ID {
		return ""
	}
	return " Standing grant given: later " + g.Tool + " calls for " + customerLabel(g.CustomerID, g.CustomerName) +
		" run without asking (" + grantBounds(g) + ", until " + clock(g.ExpiresAt) + "). It is listed on the Policy page."
}

// grantBounds says what a grant allows in all: "up to 3 calls, up to $150.00".
func grantBounds(g *models.Grant) string {
	var parts []string
	if g.MaxUses > 0 {
		parts = append(parts, "up to "+strconv.FormatInt(g.MaxUses, 10)+" calls")
	}
	if g.MaxCents > 0 {
		parts = append(parts, "up to "+g.MaxCents.String()+" in all")
	}
	return strings.Join(parts, ", ")
}

// grantRows lists the grants in force and those ended lately, for /policy.
func (s *Office) grantRows(c echo.Context) []views.GrantRow {
	grants, err := s.core.Store.Grants(c.Request().Context(), grantsEndedShown, 200)
	if err != nil {
		s.cfg.Log.Error("read the standing grants", "err", err)
		return nil
	}
	agents := map[string]string{}
	if all, err := s.core.Store.Agents(c.Request().Context()); err == nil {
		for _, ag := range all {
			agents[ag.ID] = ag.Name
		}
	}
	now := s.core.Store.Now()
	rows := make([]views.GrantRow, 0, len(grants))
	for i := range grants {
		g := &grants[i]
		state := g.StateAt(now)
		row := views.GrantRow{ID: g.ID, Customer: customerLabel(g.CustomerID, g.CustomerName), Tool: g.Tool, Used: gate.GrantUsed(g),
			By: models.ActorName(g.CreatedBy), Source: g.SourceCallID, State: string(state), Note: g.Note,
			Until: rfc3339(g.ExpiresAt), UntilText: clock(g.ExpiresAt), Active: state == models.GrantActive}
		if g.AgentID != "" {
			row.Via = "calls from agent " + cmp.Or(agents[g.AgentID], g.AgentID)
		}
		if g.RevokedAt != nil {
			row.Ended = "by " + models.ActorName(g.RevokedBy) + ", " + clock(*g.RevokedAt)
			if g.RevokeReason != "" {
				row.Ended += ": " + g.RevokeReason
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// grantRevoke is POST /policy/grants/:id/revoke (supervisors and admins).
func (s *Office) grantRevoke(c echo.Context) error {
	sc := currentStaff(c)
	_, err := s.core.Gate.RevokeGrant(c.Request().Context(), c.Param("id"), sc.staff.Actor(), c.FormValue("reason"))
	if err != nil {
		code := fault.CodeOf(err)
		if code == fault.Internal {
			return err
		}
		v := s.policyView(c)
		v.GrantError = sentence(fault.Message(err))
		return render(c, doorkit.HTTPStatus(code), views.Policy(v))
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathPolicy, url.Values{"done": {"grant_revoked"}}.Encode())+"#grants")
}

// grantJSON is a standing grant on the staff API.
type grantJSON struct {
	ID           string     `json:"id"`
	Tool         string     `json:"tool"`
	CustomerID   string     `json:"customer_id"`
	CustomerName string     `json:"customer_name"`
	AgentID      string     `json:"agent_id"`
	State        string     `json:"state"`
	MaxUses      int64      `json:"max_uses"`
	Uses         int64      `json:"uses"`
	MaxAmount    float64    `json:"max_amount"`
	UsedAmount   float64    `json:"used_amount"`
	ExpiresAt    time.Time  `json:"expires_at"`
	CreatedBy    string     `json:"created_by"`
	SourceCallID string     `json:"source_call_id"`
	Note         string     `json:"note"`
	CreatedAt    time.Time  `json:"created_at"`
	LastUsedAt   *time.Time `json:"last_used_at"`
	RevokedAt    *time.Time `json:"revoked_at"`
	RevokedBy    string     `json:"revoked_by"`
	RevokeReason string     `json:"revoke_reason"`
}

func (s *Office) grantToJSON(g *models.Grant) grantJSON {
	return grantJSON{ID: g.ID, Tool: g.Tool, CustomerID: g.CustomerID, CustomerName: g.CustomerName, AgentID: g.AgentID, State: string(g.StateAt(s.core.Store.Now())),
		MaxUses: g.MaxUses, Uses: g.Uses, MaxAmount: g.MaxCents.Dollars(), UsedAmount: g.UsedCents.Dollars(), ExpiresAt: g.ExpiresAt.UTC(),
		CreatedBy: g.CreatedBy, SourceCallID: g.SourceCallID, Note: g.Note, CreatedAt: g.CreatedAt.UTC(), LastUsedAt: utcPtr(g.LastUsedAt),
		RevokedAt: utcPtr(g.RevokedAt), RevokedBy: g.RevokedBy, RevokeReason: g.RevokeReason}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// apiGrants is GET /api/v1/grants: the grants in force and those ended in
// the last week, newest first.
func (s *Office) apiGrants(c echo.Context) error {
	grants, err := s.core.Store.Grants(c.Request().Context(), grantsEndedShown, 500)
	if err != nil {
		return err
	}
	out := make([]grantJSON, 0, len(grants))
	for i := range grants {
		out = append(out, s.grantToJSON(&grants[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"grants": out})
}

type apiRevokeRequest struct {
	Reason string `json:"reason"`
}

// apiGrantRevoke is POST /api/v1/grants/:id/revoke (supervisors and admins).
func (s *Office) apiGrantRevoke(c echo.Context) error {
	var req apiRevokeRequest
	if c.Request().ContentLength != 0 {
		if err := s.kit.Decode(c, &req); err != nil {
			return err
		}
	}
	g, err := s.core.Gate.RevokeGrant(c.Request().Context(), c.Param("id"), currentStaff(c).staff.Actor(), req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"grant": s.grantToJSON(g)})
}

// apiGrantRequest is the standing grant an approval on the API asks for.
type apiGrantRequest struct {
	Uses   int     `json:"uses"`
	Amount float64 `json:"amount"`
	For    string  `json:"for"`
	Note   string  `json:"note"`
}

func (r *apiGrantRequest) request(note string) (*gate.GrantRequest, error) {
	d, err := time.ParseDuration(r.For)
	if err != nil {
		return nil, fault.Errorf(fault.Invalid, "grant.for is a duration such as 24h or 168h")
	}
	amount, err := models.CentsFrom(r.Amount)
	if err != nil || amount < 0 {
		return nil, fault.Errorf(fault.Invalid, "grant.amount is a positive sum of dollars such as 250 or 99.50")
	}
	return &gate.GrantRequest{Uses: r.Uses, Amount: amount, For: d, Note: cmp.Or(r.Note, note)}, nil
}

package backoffice

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
)

// requireStaffToken authenticates the staff API with a bearer token.
func (s *Office) requireStaffToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			return fault.Errorf(fault.Unauthorized, "send a staff API token as Authorization: Bearer <token> (countersign token create)")
		}
		st, err := s.core.Accounts.StaffForToken(c.Request().Context(), strings.TrimSpace(token))
		if err != nil {
			return err
		}
		ctx := context.WithValue(c.Request().Context(), staffCtxKey{}, &staffCtx{staff: st})
		c.SetRequest(c.Request().WithContext(ctx))
		return next(c)
	}
}

type approvalJSON struct {
	StaffID   string          `json:"staff_id"`
	StaffName string          `json:"staff_name"`
	Role      string          `json:"role"`
	Verdict   string          `json:"verdict"`
	Note      string          `json:"note"`
	Args      json.RawMessage `json:"args"`
	Edited    bool            `json:"edited"`
	Counts    bool            `json:"counts"`
	CreatedAt time.Time       `json:"created_at"`
	// Seen is what the person was shown before deciding (absent: nothing).
	Seen []models.ReviewFact `json:"seen,omitempty"`
	// Passkey: the verdict is signed with the person's passkey.
	Passkey bool `json:"passkey"`
}

type actionJSON struct {
	ID                string          `json:"id"`
	RunID             string          `json:"run_id"`
	Tool              string          `json:"tool"`
	Args              json.RawMessage `json:"args"`
	OriginalArgs      json.RawMessage `json:"original_args,omitempty"`
	Status            string          `json:"status"`
	Reason            string          `json:"reason"`
	Rule              string          `json:"rule"`
	PolicyVersion     string          `json:"policy_version"`
	RequiredApprovals int             `json:"required_approvals"`
	RequiredRole      string          `json:"required_role,omitempty"`
	ExpiresAt         *time.Time      `json:"expires_at"`
	CreatedAt         time.Time       `json:"created_at"`
	Result            json.RawMessage `json:"result,omitempty"`
	Error             string          `json:"error,omitempty"`
	Approvals         []approvalJSON  `json:"approvals"`
	// ToolChanged warns, while the action waits, that its tool went or
	// changed since the call was made (as the action page does).
	ToolChanged string `json:"tool_changed,omitempty"`
}

// toActionJSON is an action for the staff API; disabled are the approvers
// whose account was disabled since (their approvals do not count).
func toActionJSON(c *models.ToolCall, approvals []models.Approval, disabled map[string]bool) actionJSON {
	out := actionJSON{ID: c.ID, RunID: c.RunID, Tool: c.Tool, Args: json.RawMessage(c.Args), Status: string(c.Status), Reason: c.Reason, Rule: c.Rule,
		PolicyVersion: c.PolicyVersion, RequiredApprovals: c.RequiredApprovals, RequiredRole: string(c.RequiredRole), ExpiresAt: c.ExpiresAt,
		CreatedAt: c.CreatedAt, Error: c.Error, Approvals: []approvalJSON{}}
	if c.OriginalArgs != "" {
		out.OriginalArgs = json.RawMessage(c.OriginalArgs)
	}
	if c.Result != "" {
		out.Result = json.RawMessage(c.Result)
	}
	for _, a := range approvals {
		out.Approvals = append(out.Approvals, approvalJSON{StaffID: a.StaffID, StaffName: a.StaffName, Role: string(a.StaffRole), Verdict: a.Verdict,
			Note: a.Note, Args: json.RawMessage(a.Args), Edited: a.Edited, Counts: gate.Counts(a, c.ArgsHash, disabled), CreatedAt: a.CreatedAt,
			Seen: models.DecodeFacts(a.Seen), Passkey: a.Passkey != ""})
	}
	return out
}

// apiActions lists actions: GET /api/v1/actions?status=pending.
func (s *Office) apiActions(c echo.Context) error {
	status := models.CallStatus(c.QueryParam("status"))
	if status == "" {
		status = models.CallPending
	}
	if !status.Valid() {
		return fault.Errorf(fault.Invalid, "unknown status %q", status)
	}
	calls, err := s.core.Store.AuditCalls(c.Request().Context(), models.AuditQuery{Status: status, Decision: string(policy.NeedsApproval), Limit: 500})
	if err != nil {
		return err
	}
	out := []actionJSON{}
	for i := range calls {
		approvals, disabled, err := s.approvals(c, calls[i].ID)
		if err != nil {
			return err
		}
		a := toActionJSON(&calls[i].ToolCall, approvals, disabled)
		if calls[i].Status == models.CallPending {
			a.ToolChanged = toolChanged(s.core.Gate.Tools(), &calls[i].ToolCall)
		}
		out = append(out, a)
	}
	return c.JSON(http.StatusOK, map[string]any{"actions": out})
}

// approvals are an action's approvals, with the approvers disabled since.
func (s *Office) approvals(c echo.Context, id string) ([]models.Approval, map[string]bool, error) {
	approvals, err := s.core.Store.Approvals(c.Request().Context(), id)
	if err != nil {
		return nil, nil, err
	}
	disabled, err := s.core.Gate.DisabledApprovers(c.Request().Context(), approvals)
	return approvals, disabled, err
}

func (s *Office) apiAction(c echo.Context) error {
	a, err := s.loadActionJSON(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (s *Office) loadActionJSON(c echo.Context, id string) (actionJSON, error) {
	call, err := s.core.Store.ToolCall(c.Request().Context(), id)
	if err != nil || call.Decision != string(policy.NeedsApproval) {
		return actionJSON{}, fault.Errorf(fault.NotFound, "action %s was not found", tools.Truncate(id, 64))
	}
	approvals, disabled, err := s.approvals(c, id)
	if err != nil {
		return actionJSON{}, err
	}
	a := toActionJSON(call, approvals, disabled)
	if call.Status == models.CallPending {
		a.ToolChanged = toolChanged(s.core.Gate.Tools(), call)
	}
	return a, nil
}

type apiApproveRequest struct {
	Note  string           `json:"note"`
	Args  json.RawMessage  `json:"args"`
	Grant *apiGrantRequest `json:"grant"`
}

func (s *Office) apiApprove(c echo.Context) error {
	var req apiApproveRequest
	if c.Request().ContentLength != 0 {
		if err := s.kit.Decode(c, &req); err != nil {
			return err
		}
	}
	ar := gate.ApproveRequest{Note: req.Note}
	if len(req.Args) > 0 && string(req.Args) != "null" {
		ar.Args = req.Args
	}
	if req.Grant != nil {
		var err error
		if ar.Grant, err = req.Grant.request(req.Note); err != nil {
			return err
		}
	}
	res, err := s.core.Gate.Approve(c.Request().Context(), c.Param("id"), currentStaff(c).staff.Actor(), ar)
	if err != nil {
		return err
	}
	a, err := s.loadActionJSON(c, c.Param("id"))
	if err != nil {
		return err
	}
	// The outcome as it happened: an approval that ran a failing call is
	// not reported as a success.
	var outcome map[string]any
	if res.Outcome != nil {
		outcome = map[string]any{"status": res.Outcome.Status}
		if res.Outcome.Error != "" {
			outcome["error"] = res.Outcome.Error
		}
	}
	var grant *grantJSON
	if res.Grant != nil {
		g := s.grantToJSON(res.Grant)
		grant = &g
	}
	return c.JSON(http.StatusOK, map[string]any{"action": a, "final": res.Final, "outcome": outcome,
		"approvals": res.Approvals, "required": res.Required, "grant": grant})
}

type apiRejectRequest struct {
	Reason string `json:"reason"`
}

func (s *Office) apiReject(c echo.Context) error {
	var req apiRejectRequest
	if err := s.kit.Decode(c, &req); err != nil {
		return err
	}
	if err := s.core.Gate.Reject(c.Request().Context(), c.Param("id"), currentStaff(c).staff.Actor(), req.Reason); err != nil {
		return err
	}
	a, err := s.loadActionJSON(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"action": a})
}

// apiRequireRole checks the token's role on the staff API.
func (s *Office) apiRequireRole(may func(models.StaffRole) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sc := currentStaff(c)
			if sc != nil && may(sc.staff.Role) {
				return next(c)
			}
			return fault.Errorf(fault.Forbidden, "the %s role cannot decide actions", sc.staff.Role)
		}
	}
}

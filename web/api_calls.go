package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign/views"

	"github.com/countersign/countersign/agent/telemetry"
	"go.opentelemetry.io/otel/propagation"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
)

// The gate API: an agent Countersign does not run asks "may I?" for each
// tool call (POST /api/v1/calls) with its agent key, and learns the outcome.

type agentCtxKey struct{}

// requireAgentKey lets through requests with a valid agent key.
func (s *Server) requireAgentKey(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		if !ok || strings.TrimSpace(key) == "" {
			return fault.Errorf(fault.Unauthorized, "send an agent key as Authorization: Bearer <key> (countersign agent add)")
		}
		ag, err := s.core.Accounts.AgentForKey(c.Request().Context(), key)
		if err != nil {
			return err
		}
		return next(withAgent(c, ag))
	}
}

// withAgent is c with the agent that asks.
func withAgent(c echo.Context, ag *models.Agent) echo.Context {
	c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), agentCtxKey{}, ag)))
	return c
}

func currentAgent(c echo.Context) *models.Agent {
	ag, _ := c.Request().Context().Value(agentCtxKey{}).(*models.Agent)
	return ag
}

type callRequestJSON struct {
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Session    string          `json:"session"`
	CustomerID string          `json:"customer_id"`
	Context    string          `json:"context"`
}

// agentCallJSON is a call as the agent that asked sees it.
type agentCallJSON struct {
	ID         string          `json:"id"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Status     string          `json:"status"`
	Decision   *decisionJSON   `json:"decision"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	Session    string          `json:"session"`
	CustomerID string          `json:"customer_id,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	DecidedAt  *time.Time      `json:"decided_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	// Replay: this answers the same intent asked again; the call is the
	// one a person decided before, not a new one.
	Replay bool `json:"replay,omitempty"`
	// Receipt is where the call's signed receipt is, once it is final.
	Receipt string `json:"receipt,omitempty"`
	// Told is what became of the call in words, as MCP clients and
	// Countersign's own model are told it (gate.TellOutcome); absent for a
	// call that succeeded (its result says it).
	Told string `json:"told,omitempty"`
}

func agentCallView(c *models.ToolCall, session string) agentCallJSON {
	out := agentCallJSON{ID: c.ID, Tool: c.Tool, Args: argsJSON(c), Status: string(c.Status), Error: c.Error,
		Session: session, CustomerID: c.CustomerID, CreatedAt: c.CreatedAt, DecidedAt: c.DecidedAt, FinishedAt: c.FinishedAt}
	if c.Decision != "" {
		out.Decision = &decisionJSON{Verdict: c.Decision, Rule: c.Rule, Reason: c.Reason, PolicyVersion: c.PolicyVersion}
	}
	if c.Result != "" {
		out.Result = json.RawMessage(c.Result)
	}
	if c.Status.Final() {
		out.Receipt = views.Reverse(views.PathAPICallReceipt, c.ID)
	}
	out.Told = gate.TellOutcome(c).Words
	return out
}

// callCreate asks the gate about one call: POST /api/v1/calls.
func (s *Server) callCreate(c echo.Context) error {
	ag := currentAgent(c)
	if !s.agentAllowed(ag) {
		return s.agentTooFast(ag)
	}
	var req callRequestJSON
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	req.Session = strings.TrimSpace(req.Session)
	var problems []string
	if req.Tool == "" {
		problems = append(problems, "tool is required")
	}
	if req.Session == "" || len(req.Session) > 200 {
		problems = append(problems, "session is required: your conversation's id, at most 200 characters")
	}
	if len(req.CustomerID) > 64 {
		problems = append(problems, "customer_id is at most 64 characters")
	}
	if len(req.Context) > 4000 {
		problems = append(problems, "context is at most 4,000 characters")
	}
	if len(problems) > 0 {
		return fault.Errorf(fault.Invalid, "%s", strings.Join(problems, "; "))
	}
	// A caller's traceparent header: the call's spans join its trace.
	ctx := telemetry.Continue(c.Request().Context(), propagation.HeaderCarrier(c.Request().Header))
	// The Idempotency-Key's rules are the core's (gate.Outside).
	asked, err := s.core.Outside.Ask(ctx, gate.OutsideCall{Agent: ag, Session: req.Session, CustomerID: req.CustomerID, Context: req.Context,
		Tool: req.Tool, Args: req.Args, IdempotencyKey: c.Request().Header.Get("Idempotency-Key")})
	if err != nil {
		return err
	}
	if asked.SameKey {
		return c.JSON(http.StatusOK, map[string]any{"call": agentCallView(asked.Call, asked.Session)})
	}
	call, err := s.core.Outside.Record(ctx, asked)
	if err != nil {
		return err
	}
	if asked.Joined {
		// The same intent of this agent, asked before (perhaps in another
		// session) and still waiting or decided within the intent window:
		// that call, as over MCP, never a second action.
		s.handedOver(ctx, call)
		view := agentCallView(call, asked.Session)
		view.Replay = asked.Replay()
		return c.JSON(http.StatusOK, map[string]any{"call": view})
	}
	return c.JSON(http.StatusCreated, map[string]any{"call": agentCallView(call, asked.Session)})
}

// handedOver records when the agent was first handed the outcome of a
// call that waited for a person, for the record. Best effort: it decides
// nothing.
func (s *Server) handedOver(ctx context.Context, call *models.ToolCall) {
	if err := s.core.Outside.HandedOver(ctx, call); err != nil {
		s.cfg.Log.Warn("could not record that an agent was handed an outcome", "call_id", call.ID, "err", err)
	}
}

// agentCall reads a call of the agent's own sessions (another's is 404).
func (s *Server) agentCall(c echo.Context) (*models.ToolCall, *models.Run, error) {
	return s.core.Outside.AgentsCall(c.Request().Context(), currentAgent(c), c.Param("id"))
}

// MaxCallWait is the longest a GET /api/v1/calls/:id?wait= waits.
const MaxCallWait = 60 * time.Second

// callGet reads a call: GET /api/v1/calls/:id; with ?wait=30s it answers
// when the call is decided or done, or when the wait is over.
func (s *Server) callGet(c echo.Context) error {
	call, run, err := s.agentCall(c)
	if err != nil {
		return err
	}
	if w := c.QueryParam("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 {
			return fault.Errorf(fault.Invalid, "wait must be a duration like 30s")
		}
		if d > MaxCallWait {
			d = MaxCallWait
		}
		if s.core.Outside.Waiting(call) {
			err = s.holdRequest(c, false, func() error {
				allowLongWrite(c)
				call = s.core.Outside.Wait(c.Request().Context(), call, d, 0, nil)
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	s.handedOver(c.Request().Context(), call)
	return c.JSON(http.StatusOK, map[string]any{"call": agentCallView(call, run.Session)})
}

type resultJSON struct {
	OK     *bool           `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// callResult records how the agent carried out a decision-only tool's call:
// POST /api/v1/calls/:id/result.
func (s *Server) callResult(c echo.Context) error {
	call, run, err := s.agentCall(c)
	if err != nil {
		return err
	}
	var req resultJSON
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.OK == nil {
		return fault.Errorf(fault.Invalid, "ok is required: true with result, or false with error")
	}
	if _, err := s.core.Gate.Report(c.Request().Context(), call.ID, currentAgent(c), *req.OK, req.Result, req.Error); err != nil {
		return err
	}
	call, err = s.core.Store.ToolCall(c.Request().Context(), call.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"call": agentCallView(call, run.Session)})
}

// Package gateapi is the gate API, the door of agents Countersign does not
// run: an agent asks "may I?" for each tool call (POST /api/v1/calls) with
// its agent key, and learns the outcome (GET /api/v1/calls/:id, waiting
// with ?wait=), and reports how it carried out a decision-only tool's
// call (POST /api/v1/calls/:id/result). Handlers over the core's Outside
// and the agent doors' kit (web/doorkit).
package gateapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/propagation"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// Door is the gate API's handlers.
type Door struct{ kit *doorkit.Kit }

// Mount adds the gate API's routes to e.
func Mount(e *echo.Echo, kit *doorkit.Kit) {
	d := &Door{kit: kit}
	e.POST(views.PathAPICalls, d.create, kit.RequireAgentKey, kit.Bodies(nil))
	e.GET(views.PathAPICall, d.get, kit.RequireAgentKey)
	e.POST(views.PathAPICallResult, d.result, kit.RequireAgentKey)
}

type callRequestJSON struct {
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Session    string          `json:"session"`
	CustomerID string          `json:"customer_id"`
	Context    string          `json:"context"`
}

// create asks the gate about one call: POST /api/v1/calls.
func (d *Door) create(c echo.Context) error {
	ag := doorkit.Agent(c)
	if err := d.kit.Allow(ag); err != nil {
		return err
	}
	var req callRequestJSON
	if err := d.kit.Decode(c, &req); err != nil {
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
	asked, err := d.kit.Core.Outside.Ask(ctx, gate.OutsideCall{Agent: ag, Session: req.Session, CustomerID: req.CustomerID, Context: req.Context,
		Tool: req.Tool, Args: req.Args, IdempotencyKey: c.Request().Header.Get("Idempotency-Key")})
	if err != nil {
		return err
	}
	if asked.SameKey {
		return c.JSON(http.StatusOK, map[string]any{"call": doorkit.CallView(asked.Call, asked.Session)})
	}
	call, err := d.kit.Core.Outside.Record(ctx, asked)
	if err != nil {
		return err
	}
	if asked.Joined {
		// The same intent of this agent, asked before (perhaps in another
		// session) and still waiting or decided within the intent window:
		// that call, as over MCP, never a second action.
		d.kit.HandedOver(ctx, call)
		view := doorkit.CallView(call, asked.Session)
		view.Replay = asked.Replay()
		return c.JSON(http.StatusOK, map[string]any{"call": view})
	}
	return c.JSON(http.StatusCreated, map[string]any{"call": doorkit.CallView(call, asked.Session)})
}

// agentCall reads a call of the agent's own sessions (another's is 404).
func (d *Door) agentCall(c echo.Context) (*models.ToolCall, *models.Run, error) {
	return d.kit.Core.Outside.AgentsCall(c.Request().Context(), doorkit.Agent(c), c.Param("id"))
}

// MaxCallWait is the longest a GET /api/v1/calls/:id?wait= waits.
const MaxCallWait = 60 * time.Second

// get reads a call: GET /api/v1/calls/:id; with ?wait=30s it answers
// when the call is decided or done, or when the wait is over.
func (d *Door) get(c echo.Context) error {
	call, run, err := d.agentCall(c)
	if err != nil {
		return err
	}
	if w := c.QueryParam("wait"); w != "" {
		wait, err := time.ParseDuration(w)
		if err != nil || wait < 0 {
			return fault.Errorf(fault.Invalid, "wait must be a duration like 30s")
		}
		wait = min(wait, MaxCallWait)
		if d.kit.Core.Outside.Waiting(call) {
			err = d.kit.Hold(c, false, func() error {
				// The answer may come after the server's write timeout.
				_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
				call = d.kit.Core.Outside.Wait(c.Request().Context(), call, wait, 0, nil)
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	d.kit.HandedOver(c.Request().Context(), call)
	return c.JSON(http.StatusOK, map[string]any{"call": doorkit.CallView(call, run.Session)})
}

type resultJSON struct {
	OK     *bool           `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// result records how the agent carried out a decision-only tool's call:
// POST /api/v1/calls/:id/result.
func (d *Door) result(c echo.Context) error {
	call, run, err := d.agentCall(c)
	if err != nil {
		return err
	}
	var req resultJSON
	if err := d.kit.Decode(c, &req); err != nil {
		return err
	}
	if req.OK == nil {
		return fault.Errorf(fault.Invalid, "ok is required: true with result, or false with error")
	}
	if _, err := d.kit.Core.Gate.Report(c.Request().Context(), call.ID, doorkit.Agent(c), *req.OK, req.Result, req.Error); err != nil {
		return err
	}
	call, err = d.kit.Core.Store.ToolCall(c.Request().Context(), call.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"call": doorkit.CallView(call, run.Session)})
}

package doorkit

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/views"
)

// CallJSON is a call as the agent that asked sees it.
type CallJSON struct {
	ID         string          `json:"id"`
	Tool       string          `json:"tool"`
	Args       json.RawMessage `json:"args"`
	Status     string          `json:"status"`
	Decision   *DecisionJSON   `json:"decision"`
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

// DecisionJSON is what the policy decided of a call.
type DecisionJSON struct {
	Verdict       string `json:"verdict"`
	Rule          string `json:"rule"`
	Reason        string `json:"reason"`
	PolicyVersion string `json:"policy_version"`
}

// CallView is c as the agent that asked it in session sees it.
func CallView(c *models.ToolCall, session string) CallJSON {
	out := CallJSON{ID: c.ID, Tool: c.Tool, Args: ArgsJSON(c), Status: string(c.Status), Error: c.Error,
		Session: session, CustomerID: c.CustomerID, CreatedAt: c.CreatedAt, DecidedAt: c.DecidedAt, FinishedAt: c.FinishedAt}
	if c.Decision != "" {
		out.Decision = &DecisionJSON{Verdict: c.Decision, Rule: c.Rule, Reason: c.Reason, PolicyVersion: c.PolicyVersion}
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

// ArgsJSON shows the normalized arguments, or what the model sent when it
// was not valid JSON (as a string).
func ArgsJSON(c *models.ToolCall) json.RawMessage {
	if c.Args != "" {
		return json.RawMessage(c.Args)
	}
	if json.Valid([]byte(c.RawArgs)) && c.RawArgs != "" {
		return json.RawMessage(c.RawArgs)
	}
	b, _ := json.Marshal(c.RawArgs)
	return b
}

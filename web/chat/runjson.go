package chat

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web/doorkit"
)

type runJSON struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	CustomerID string     `json:"customer_id"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	Turns      []turnJSON `json:"turns"`
}

type turnJSON struct {
	Seq       int64      `json:"seq"`
	Role      string     `json:"role"`
	Text      string     `json:"text"`
	CreatedAt time.Time  `json:"created_at"`
	ToolCalls []callJSON `json:"tool_calls"`
}

type callJSON struct {
	ID       string          `json:"id"`
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args"`
	Status   string          `json:"status"`
	Decision *decisionJSON   `json:"decision"`
	// Receipt is the call's signed receipt (a JWS) once it is final and
	// signed: the run keeps, with each tool call, the proof of how it ended.
	Receipt string `json:"receipt,omitempty"`
}

// decisionJSON is what the policy decided of a call.
type decisionJSON = doorkit.DecisionJSON

// argsJSON shows the normalized arguments, or what the model sent when it
// was not valid JSON (as a string).
func argsJSON(c *models.ToolCall) json.RawMessage { return doorkit.ArgsJSON(c) }

func toCallJSON(c *models.ToolCall) callJSON {
	out := callJSON{ID: c.ID, Tool: c.Tool, Args: argsJSON(c), Status: string(c.Status)}
	if c.Decision != "" {
		out.Decision = &decisionJSON{Verdict: c.Decision, Rule: c.Rule, Reason: c.Reason, PolicyVersion: c.PolicyVersion}
	}
	return out
}

func toTurnJSON(t *models.Turn, calls []models.ToolCall) turnJSON {
	out := turnJSON{Seq: t.Seq, Role: t.Role, Text: t.Text, CreatedAt: t.CreatedAt, ToolCalls: []callJSON{}}
	for i := range calls {
		if calls[i].TurnID == t.ID && t.Role == models.RoleAssistant {
			out.ToolCalls = append(out.ToolCalls, toCallJSON(&calls[i]))
		}
	}
	return out
}

func toRunJSON(r *models.Run, turns []models.Turn, calls []models.ToolCall, receipts map[string]string) runJSON {
	out := runJSON{ID: r.ID, Status: string(r.Status), CustomerID: r.CustomerID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Turns: []turnJSON{}}
	for i := range turns {
		t := toTurnJSON(&turns[i], calls)
		for j := range t.ToolCalls {
			t.ToolCalls[j].Receipt = receipts[t.ToolCalls[j].ID]
		}
		out.Turns = append(out.Turns, t)
	}
	return out
}

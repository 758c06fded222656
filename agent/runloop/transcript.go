package runloop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/models"
)

// What the model is shown of a run, and small helpers over its turns.

// request builds what the model sees: no system notices, and each assistant
// turn's tool results right after it, even when the customer wrote in
// between (messages sent while paused are answered after the results).
func (r *Runner) request(turns []models.Turn, calls []models.ToolCall) llm.Request {
	req := llm.Request{System: r.System}
	for _, t := range r.gate.Tools().All() {
		if !t.Executes() {
			continue // decision-only: for outside agents, which carry it out
		}
		req.Tools = append(req.Tools, llm.ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema})
	}
	resultTurn := map[string]*models.Turn{}
	for i := range turns {
		if turns[i].Role == models.RoleTool {
			resultTurn[turns[i].ToolCallID] = &turns[i]
		}
	}
	callOf := map[string]*models.ToolCall{}
	for i := range calls {
		callOf[fmt.Sprintf("%d/%s", calls[i].TurnID, calls[i].ModelCallID)] = &calls[i]
	}
	for _, t := range turns {
		switch t.Role {
		case models.RoleCustomer:
			req.Turns = append(req.Turns, llm.Turn{Role: models.RoleCustomer, Text: t.Text})
		case models.RoleAssistant:
			mt := llm.Turn{Role: models.RoleAssistant, Text: t.Text}
			if t.Calls != "" {
				_ = json.Unmarshal([]byte(t.Calls), &mt.Calls)
			}
			req.Turns = append(req.Turns, mt)
			for _, mc := range mt.Calls {
				c := callOf[fmt.Sprintf("%d/%s", t.ID, mc.ID)]
				if c == nil {
					continue
				}
				rt := resultTurn[c.ID]
				if rt == nil {
					continue
				}
				args := c.Args
				if args == "" {
					args = "{}"
				}
				res := &llm.ToolResult{Tool: c.Tool, Status: c.Status, Output: json.RawMessage(nonEmptyJSON(c.Result)), Error: c.Error,
					Args: json.RawMessage(args), Request: describeRequest(r.gate.Tools(), c.Tool, args)}
				if c.OriginalArgs != "" {
					res.OriginalArgs = json.RawMessage(c.OriginalArgs)
				}
				req.Turns = append(req.Turns, llm.Turn{Role: models.RoleTool, CallID: mc.ID, Text: rt.Text, Result: res})
			}
		}
	}
	return req
}

func nonEmptyJSON(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

func lastAssistant(turns []models.Turn) *models.Turn {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role == models.RoleAssistant {
			return &turns[i]
		}
	}
	return nil
}

// lastSpoken is the last turn that is not a system notice.
func lastSpoken(turns []models.Turn) *models.Turn {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].Role != models.RoleSystem {
			return &turns[i]
		}
	}
	return nil
}

func assistantTurnsSinceCustomer(turns []models.Turn) int {
	n := 0
	for i := len(turns) - 1; i >= 0 && turns[i].Role != models.RoleCustomer; i-- {
		if turns[i].Role == models.RoleAssistant {
			n++
		}
	}
	return n
}

func textHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func customerActor(run *models.Run) string {
	if run.CustomerID == "" {
		return "customer:anonymous"
	}
	return "customer:" + run.CustomerID
}

func roleActor(role string) string {
	switch role {
	case models.RoleAssistant:
		return "model"
	case models.RoleCustomer:
		return "customer"
	}
	return "system"
}

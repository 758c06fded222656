package agent

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/countersign/countersign/models"
)

// Model produces the assistant's next turn from the conversation so far.
type Model interface {
	Next(ctx context.Context, req ModelRequest) (ModelReply, error)
}

// ModelRequest is what a model is given.
type ModelRequest struct {
	System string
	Turns  []ModelTurn
	Tools  []ToolSpec
}

// ToolSpec is a tool as a model sees it.
type ToolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// ModelTurn is one turn of the conversation, in the order a model expects:
// the results of an assistant turn's calls follow it directly.
type ModelTurn struct {
	Role  string // customer | assistant | tool
	Text  string
	Calls []ModelCall // assistant turns that asked for tools
	// Tool results: which call, and the outcome (Text is what the model reads).
	CallID string
	Result *ToolResult
}

// ModelCall is one tool call a model asked for.
type ModelCall struct {
	ID   string          `json:"id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// ToolResult is the outcome of a call, structured (the offline model reads it).
type ToolResult struct {
	Tool   string
	Status models.CallStatus
	Output json.RawMessage
	Error  string
	Args   json.RawMessage
}

// ModelReply is the assistant's next turn: text, tool calls, or both.
type ModelReply struct {
	Text  string
	Calls []ModelCall
}

// ErrModel wraps failures of a model provider; the run fails and staff can retry.
var ErrModel = errors.New("model provider failed")

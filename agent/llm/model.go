// Package llm holds the language models a run talks to: the Model
// interface and its request and reply, and the OpenAI-compatible and
// Anthropic adapters. The demo's scripted model is demo/offline.
package llm

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/countersign/countersign/models"
)

// Model produces the assistant's next turn from the conversation so far.
type Model interface {
	Next(ctx context.Context, req Request) (Reply, error)
}

// Request is what a model is given.
type Request struct {
	System string
	Turns  []Turn
	Tools  []ToolSpec
}

// ToolSpec is a tool as a model sees it.
type ToolSpec struct {
	Name        string
	Description string
	Schema      json.RawMessage
}

// Turn is one turn of the conversation, in the order a model expects:
// the results of an assistant turn's calls follow it directly.
type Turn struct {
	Role  string // customer | assistant | tool
	Text  string
	Calls []Call // assistant turns that asked for tools
	// Tool results: which call, and the outcome (Text is what the model reads).
	CallID string
	Result *ToolResult
}

// Call is one tool call a model asked for.
type Call struct {
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
	// Request is how the customer heard the call while it waited
	// ("your refund request of $900.00 on order A1002").
	Request string
	// OriginalArgs are the arguments asked for, when a person changed them
	// before approving (Args are what ran); nil otherwise.
	OriginalArgs json.RawMessage
}

// Reply is the assistant's next turn: text, tool calls, or both.
type Reply struct {
	Text  string
	Calls []Call
}

// ErrModel wraps failures of a model provider; the run fails and staff can retry.
var ErrModel = errors.New("model provider failed")

// None is the model when none was chosen: every run it is asked for ends
// with ErrNoModel, which says what to choose. The gate API, MCP and the
// back office need no model.
type None struct{}

// ErrNoModel is None's answer.
var ErrNoModel = errors.New("no model is set up for Countersign's own chat: start it with --model openai, anthropic or offline (the demo shop's scripted model)")

// Next refuses.
func (None) Next(context.Context, Request) (Reply, error) { return Reply{}, ErrNoModel }

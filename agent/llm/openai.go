package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// OpenAI speaks Chat Completions with tools, so it works with OpenAI and
// every compatible server (Ollama, vLLM, LM Studio, OpenRouter) through
// BaseURL. It is the plain HTTP API: one endpoint, no SDK.
type OpenAI struct {
	cfg Config
}

// NewOpenAI builds an OpenAI-compatible model.
func NewOpenAI(cfg Config) *OpenAI {
	cfg.defaults("gpt-4o-mini", "https://api.openai.com/v1")
	return &OpenAI{cfg: cfg}
}

// The Chat Completions request and answer, as much of them as a run uses.
type (
	oaiRequest struct {
		Model               string       `json:"model"`
		Messages            []oaiMessage `json:"messages"`
		Tools               []oaiTool    `json:"tools,omitempty"`
		ParallelToolCalls   *bool        `json:"parallel_tool_calls,omitempty"`
		MaxCompletionTokens int64        `json:"max_completion_tokens"`
	}
	oaiMessage struct {
		Role       string        `json:"role"`
		Content    *string       `json:"content,omitempty"`
		ToolCalls  []oaiToolCall `json:"tool_calls,omitempty"`
		ToolCallID string        `json:"tool_call_id,omitempty"`
	}
	oaiToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	oaiTool struct {
		Type     string      `json:"type"`
		Function oaiFunction `json:"function"`
	}
	oaiFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	oaiAnswer struct {
		Choices []struct {
			Message struct {
				// A string, null, or (from some compatible servers) parts.
				Content   json.RawMessage `json:"content"`
				ToolCalls []oaiToolCall   `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
)

// Next implements Model.
func (m *OpenAI) Next(ctx context.Context, req Request) (Reply, error) {
	body := oaiRequest{Model: m.cfg.Model, MaxCompletionTokens: m.cfg.MaxTokens}
	text := func(s string) *string { return &s }
	if req.System != "" {
		body.Messages = append(body.Messages, oaiMessage{Role: "system", Content: text(req.System)})
	}
	for _, t := range req.Turns {
		switch t.Role {
		case "customer":
			body.Messages = append(body.Messages, oaiMessage{Role: "user", Content: text(t.Text)})
		case "tool":
			body.Messages = append(body.Messages, oaiMessage{Role: "tool", Content: text(t.Text), ToolCallID: t.CallID})
		case "assistant":
			a := oaiMessage{Role: "assistant"}
			if t.Text != "" {
				a.Content = text(t.Text)
			}
			for _, c := range t.Calls {
				tc := oaiToolCall{ID: c.ID, Type: "function"}
				tc.Function.Name, tc.Function.Arguments = c.Tool, string(c.Args)
				a.ToolCalls = append(a.ToolCalls, tc)
			}
			body.Messages = append(body.Messages, a)
		}
	}
	for _, tool := range req.Tools {
		if err := objectSchema(tool); err != nil {
			return Reply{}, err
		}
		body.Tools = append(body.Tools, oaiTool{Type: "function",
			Function: oaiFunction{Name: tool.Name, Description: tool.Description, Parameters: tool.Schema}})
	}
	if len(body.Tools) > 0 {
		parallel := true
		body.ParallelToolCalls = &parallel
	}
	header := http.Header{}
	if m.cfg.APIKey != "" {
		header.Set("Authorization", "Bearer "+m.cfg.APIKey)
	}
	var answer oaiAnswer
	if err := m.cfg.post(ctx, "openai", "/chat/completions", header, body, &answer); err != nil {
		return Reply{}, err
	}
	if len(answer.Choices) == 0 {
		return Reply{}, fmt.Errorf("%w: openai: the response has no choices", ErrModel)
	}
	msg := answer.Choices[0].Message
	var reply Reply
	if json.Unmarshal(msg.Content, &reply.Text) != nil {
		var parts []struct{ Type, Text string }
		_ = json.Unmarshal(msg.Content, &parts)
		for _, p := range parts {
			if p.Type == "text" {
				reply.Text += p.Text
			}
		}
	}
	for _, c := range msg.ToolCalls {
		if c.Type != "" && c.Type != "function" {
			continue
		}
		// Arguments arrive as a string the model wrote; garbage is kept as
		// it is and becomes an invalid call the model is told about.
		reply.Calls = append(reply.Calls, Call{ID: c.ID, Tool: c.Function.Name, Args: json.RawMessage(c.Function.Arguments)})
	}
	return reply, nil
}

// objectSchema checks that a tool's schema is a JSON object, as both
// providers require of a tool's parameters.
func objectSchema(tool ToolSpec) error {
	var schema map[string]any
	if err := json.Unmarshal(tool.Schema, &schema); err != nil || schema == nil {
		return fmt.Errorf("%w: tool %s: its schema is not a JSON object", ErrModel, tool.Name)
	}
	return nil
}

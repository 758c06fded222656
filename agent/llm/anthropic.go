package llm

import (
	"context"
	"encoding/json"
	"net/http"
)

// anthropicVersion is the Messages API version the adapter speaks.
const anthropicVersion = "2023-06-01"

// Anthropic speaks the Messages API with tools: the plain HTTP API, one
// endpoint, no SDK.
type Anthropic struct {
	cfg Config
}

// NewAnthropic builds an Anthropic model.
func NewAnthropic(cfg Config) *Anthropic {
	cfg.defaults("claude-sonnet-4-5", "https://api.anthropic.com")
	return &Anthropic{cfg: cfg}
}

// The Messages request and answer, as much of them as a run uses.
type (
	antRequest struct {
		Model     string       `json:"model"`
		MaxTokens int64        `json:"max_tokens"`
		System    []antBlock   `json:"system,omitempty"`
		Messages  []antMessage `json:"messages"`
		Tools     []antTool    `json:"tools,omitempty"`
	}
	antMessage struct {
		Role    string     `json:"role"`
		Content []antBlock `json:"content"`
	}
	antBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   []antBlock      `json:"content,omitempty"`
		IsError   *bool           `json:"is_error,omitempty"`
	}
	antTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	antAnswer struct {
		Content []antBlock `json:"content"`
	}
)

// Next implements Model.
func (m *Anthropic) Next(ctx context.Context, req Request) (Reply, error) {
	body := antRequest{Model: m.cfg.Model, MaxTokens: m.cfg.MaxTokens}
	if req.System != "" {
		body.System = []antBlock{{Type: "text", Text: req.System}}
	}
	// Tool results go back as a user turn; consecutive results share one.
	var results []antBlock
	flush := func() {
		if len(results) > 0 {
			body.Messages = append(body.Messages, antMessage{Role: "user", Content: results})
			results = nil
		}
	}
	for _, t := range req.Turns {
		switch t.Role {
		case "tool":
			isErr := t.Result != nil && t.Result.Status != "succeeded"
			results = append(results, antBlock{Type: "tool_result", ToolUseID: t.CallID,
				Content: []antBlock{{Type: "text", Text: t.Text}}, IsError: &isErr})
		case "customer":
			flush()
			body.Messages = append(body.Messages, antMessage{Role: "user", Content: []antBlock{{Type: "text", Text: t.Text}}})
		case "assistant":
			flush()
			var blocks []antBlock
			if t.Text != "" {
				blocks = append(blocks, antBlock{Type: "text", Text: t.Text})
			}
			for _, c := range t.Calls {
				// A tool_use input must be an object; garbage the model wrote
				// goes back as an empty one (the call was refused anyway).
				input := json.RawMessage(`{}`)
				var obj map[string]any
				if json.Unmarshal(c.Args, &obj) == nil && obj != nil {
					input = c.Args
				}
				blocks = append(blocks, antBlock{Type: "tool_use", ID: c.ID, Name: c.Tool, Input: input})
			}
			if len(blocks) > 0 {
				body.Messages = append(body.Messages, antMessage{Role: "assistant", Content: blocks})
			}
		}
	}
	flush()
	for _, tool := range req.Tools {
		if err := objectSchema(tool); err != nil {
			return Reply{}, err
		}
		body.Tools = append(body.Tools, antTool{Name: tool.Name, Description: tool.Description, InputSchema: tool.Schema})
	}
	header := http.Header{}
	header.Set("x-api-key", m.cfg.APIKey)
	header.Set("anthropic-version", anthropicVersion)
	var answer antAnswer
	if err := m.cfg.post(ctx, "anthropic", "/v1/messages", header, body, &answer); err != nil {
		return Reply{}, err
	}
	var reply Reply
	for _, b := range answer.Content {
		switch b.Type {
		case "text":
			if reply.Text != "" {
				reply.Text += "\n"
			}
			reply.Text += b.Text
		case "tool_use":
			reply.Calls = append(reply.Calls, Call{ID: b.ID, Tool: b.Name, Args: b.Input})
		}
	}
	return reply, nil
}

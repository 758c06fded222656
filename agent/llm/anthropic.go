package llm

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// Anthropic speaks the Messages API with tools.
type Anthropic struct {
	client anthropic.Client
	cfg    Config
}

// NewAnthropic builds an Anthropic model.
func NewAnthropic(cfg Config) *Anthropic {
	cfg.defaults("claude-sonnet-4-5")
	opts := []option.RequestOption{option.WithAPIKey(cfg.APIKey), option.WithMaxRetries(cfg.MaxRetries), option.WithRequestTimeout(cfg.Timeout)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Anthropic{client: anthropic.NewClient(opts...), cfg: cfg}
}

// Next implements Model.
func (m *Anthropic) Next(ctx context.Context, req Request) (Reply, error) {
	params := anthropic.MessageNewParams{Model: m.cfg.Model, MaxTokens: m.cfg.MaxTokens}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	// Tool results go back as a user turn; consecutive results share one.
	var pendingResults []anthropic.ContentBlockParamUnion
	flush := func() {
		if len(pendingResults) > 0 {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(pendingResults...))
			pendingResults = nil
		}
	}
	for _, t := range req.Turns {
		switch t.Role {
		case "tool":
			isErr := t.Result != nil && t.Result.Status != "succeeded"
			pendingResults = append(pendingResults, anthropic.NewToolResultBlock(t.CallID, t.Text, isErr))
		case "customer":
			flush()
			params.Messages = append(params.Messages, anthropic.NewUserMessage(anthropic.NewTextBlock(t.Text)))
		case "assistant":
			flush()
			var blocks []anthropic.ContentBlockParamUnion
			if t.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(t.Text))
			}
			for _, c := range t.Calls {
				var input any = json.RawMessage(c.Args)
				if !json.Valid(c.Args) {
					input = map[string]any{}
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(c.ID, input, c.Tool))
			}
			if len(blocks) > 0 {
				params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
			}
		}
	}
	flush()
	for _, tool := range req.Tools {
		var schema struct {
			Properties any      `json:"properties"`
			Required   []string `json:"required"`
		}
		var extra map[string]any
		if err := json.Unmarshal(tool.Schema, &schema); err != nil {
			return Reply{}, fmt.Errorf("%w: tool %s schema: %v", ErrModel, tool.Name, err)
		}
		_ = json.Unmarshal(tool.Schema, &extra)
		delete(extra, "properties")
		delete(extra, "required")
		delete(extra, "type")
		tp := anthropic.ToolParam{Name: tool.Name, Description: anthropic.String(tool.Description),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required, ExtraFields: extra}}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	resp, err := m.client.Messages.New(ctx, params)
	if err != nil {
		return Reply{}, fmt.Errorf("%w: anthropic: %v", ErrModel, err)
	}
	var reply Reply
	for _, b := range resp.Content {
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

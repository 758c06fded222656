package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// Config configures a hosted model. The key is only ever sent to
// the provider: it never reaches the model's context or the logs.
type Config struct {
	BaseURL    string
	APIKey     string
	Model      string
	Timeout    time.Duration // per request, retries included
	MaxRetries int           // on 429 and 5xx, with backoff
	MaxTokens  int64
	HTTPClient *http.Client
}

func (c *Config) defaults(model string) {
	if c.Model == "" {
		c.Model = model
	}
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 3
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = 1024
	}
}

// OpenAI speaks Chat Completions with tools, so it works with OpenAI and
// every compatible server (Ollama, vLLM, LM Studio, OpenRouter) through
// BaseURL.
type OpenAI struct {
	client openai.Client
	cfg    Config
}

// NewOpenAI builds an OpenAI-compatible model.
func NewOpenAI(cfg Config) *OpenAI {
	cfg.defaults("gpt-4o-mini")
	opts := []option.RequestOption{option.WithAPIKey(cfg.APIKey), option.WithMaxRetries(cfg.MaxRetries), option.WithRequestTimeout(cfg.Timeout)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &OpenAI{client: openai.NewClient(opts...), cfg: cfg}
}

// Next implements Model.
func (m *OpenAI) Next(ctx context.Context, req Request) (Reply, error) {
	params := openai.ChatCompletionNewParams{
		Model:               shared.ChatModel(m.cfg.Model),
		ParallelToolCalls:   openai.Bool(true),
		MaxCompletionTokens: openai.Int(m.cfg.MaxTokens),
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, t := range req.Turns {
		switch t.Role {
		case "customer":
			params.Messages = append(params.Messages, openai.UserMessage(t.Text))
		case "tool":
			params.Messages = append(params.Messages, openai.ToolMessage(t.Text, t.CallID))
		case "assistant":
			a := openai.ChatCompletionAssistantMessageParam{}
			if t.Text != "" {
				a.Content.OfString = param.NewOpt(t.Text)
			}
			for _, c := range t.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Tool, Arguments: string(c.Args)}}})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	for _, tool := range req.Tools {
		var schema map[string]any
		if err := json.Unmarshal(tool.Schema, &schema); err != nil {
			return Reply{}, fmt.Errorf("%w: tool %s schema: %v", ErrModel, tool.Name, err)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: tool.Name, Description: openai.String(tool.Description), Parameters: shared.FunctionParameters(schema)}))
	}
	resp, err := m.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return Reply{}, fmt.Errorf("%w: openai: %v", ErrModel, err)
	}
	if len(resp.Choices) == 0 {
		return Reply{}, fmt.Errorf("%w: openai: the response has no choices", ErrModel)
	}
	msg := resp.Choices[0].Message
	reply := Reply{Text: msg.Content}
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

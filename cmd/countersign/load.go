package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

func newModel(cfg config) (llm.Model, error) {
	pc := llm.Config{BaseURL: cfg.ModelBaseURL, APIKey: cfg.ModelAPIKey, Model: cfg.ModelName, Timeout: cfg.ModelTimeout}
	switch cfg.Model {
	case "":
		if m := cfg.business().Model; m != nil {
			return m, nil
		}
		return llm.None{}, nil
	case "offline":
		return demo.Shop.Model, nil // the demo shop's scripted model, with or without its tools
	case "openai":
		pc.APIKey = cmp.Or(pc.APIKey, os.Getenv("OPENAI_API_KEY"))
		pc.BaseURL = cmp.Or(pc.BaseURL, os.Getenv("OPENAI_BASE_URL"))
		if pc.APIKey == "" && pc.BaseURL == "" {
			return nil, fmt.Errorf("--model openai needs --model-api-key (or OPENAI_API_KEY), or --model-base-url for a local server")
		}
		return llm.NewOpenAI(pc), nil
	case "anthropic":
		pc.APIKey = cmp.Or(pc.APIKey, os.Getenv("ANTHROPIC_API_KEY"))
		pc.BaseURL = cmp.Or(pc.BaseURL, os.Getenv("ANTHROPIC_BASE_URL"))
		if pc.APIKey == "" {
			return nil, fmt.Errorf("--model anthropic needs --model-api-key (or ANTHROPIC_API_KEY)")
		}
		return llm.NewAnthropic(pc), nil
	}
	return nil, fmt.Errorf("--model %q: use offline, openai or anthropic", cfg.Model)
}

// sources are the files the flags name: the tools file, the policy (the
// demo shop's built in with --demo, else the default that decides by
// risk) and the shadow policy; with --demo the shop's tools come first.
// The store may be nil where the tools are only described.
func sources(cfg config, store *storage.Store) core.Sources {
	src := core.Sources{ToolsFile: cfg.Tools, PolicyFile: cfg.Policy, PolicyFromFile: cfg.PolicyFromFile, ShadowFile: cfg.ShadowPolicy}
	if b := cfg.business(); b.Policy != nil || b.Tools != nil {
		src.BuiltIn, src.BuiltInName = b.Policy, b.PolicyName
		if b.Tools != nil {
			src.Extra = func() []*tools.Tool { return b.Tools(store) }
		}
	}
	return src
}

// systemPrompt is what every run's model is told first: the file's words,
// the demo shop's with --demo, else "" (the neutral default).
func systemPrompt(cfg config) (string, error) {
	if cfg.SystemPrompt == "" {
		return cfg.business().Prompt, nil
	}
	b, err := os.ReadFile(cfg.SystemPrompt)
	if err != nil {
		return "", usageError(fmt.Sprintf("--system-prompt: %v", err))
	}
	text := strings.TrimSpace(string(b))
	switch {
	case text == "":
		return "", usageError(fmt.Sprintf("--system-prompt %s is empty", cfg.SystemPrompt))
	case len(b) > runloop.MaxSystemPrompt:
		return "", usageError(fmt.Sprintf("--system-prompt %s is %d bytes; at most %d", cfg.SystemPrompt, len(b), runloop.MaxSystemPrompt))
	case !utf8.ValidString(text):
		return "", usageError(fmt.Sprintf("--system-prompt %s is not UTF-8 text", cfg.SystemPrompt))
	}
	return text, nil
}

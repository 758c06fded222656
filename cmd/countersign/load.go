package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/llm/offline"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/tools/shop"
)

func newModel(cfg config) (llm.Model, error) {
	pc := llm.Config{BaseURL: cfg.ModelBaseURL, APIKey: cfg.ModelAPIKey, Model: cfg.ModelName, Timeout: cfg.ModelTimeout}
	switch cfg.Model {
	case "", "offline":
		return offline.Model{}, nil
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

// loadPolicy reads the policy file, or takes the built-in one: the demo
// shop's with --demo, else the default that decides by risk.
func loadPolicy(cfg config, registry *tools.Registry) (*policy.FilePolicy, error) {
	switch {
	case cfg.Policy == "" && cfg.Demo:
		return policy.LoadPolicy(shop.PolicyYAML, "(built-in demo shop policy)", registry)
	case cfg.Policy == "":
		return policy.LoadPolicy(policy.DefaultPolicyYAML, "(built-in default)", registry)
	}
	data, err := os.ReadFile(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return policy.LoadPolicy(data, cfg.Policy, registry)
}

// loadShadow reads the shadow policy file against the tools and insists
// that it passes its own tests, as the policy in force must.
func loadShadow(ctx context.Context, cfg config, registry *tools.Registry) (*policy.FilePolicy, error) {
	data, err := os.ReadFile(cfg.ShadowPolicy)
	if err != nil {
		return nil, fmt.Errorf("read shadow policy: %w", err)
	}
	p, err := policy.LoadPolicy(data, cfg.ShadowPolicy, registry)
	if err != nil {
		return nil, err
	}
	if failed := policy.Failing(p.RunTests(ctx)); len(failed) > 0 {
		return nil, fmt.Errorf("the shadow policy %s fails %d of its tests (run `countersign policy test %s`)", p.Source, len(failed), p.Source)
	}
	return p, nil
}

// loadToolsFile reads the tools file and connects to its MCP servers (nil
// without a file). Close the set to end those connections.
func loadToolsFile(cfg config) (*httptool.Set, error) {
	if cfg.Tools == "" {
		return nil, nil
	}
	data, err := os.ReadFile(cfg.Tools)
	if err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	return httptool.Load(data, cfg.Tools, httptool.Options{})
}

// registryOf is the tools in force: the demo shop's with --demo, and those
// of the tools file as its MCP servers offer them now. version covers what
// the file offers ("" without one), so a reload or an MCP server's changed
// list is seen. The store may be nil where the tools are only described.
func registryOf(cfg config, store *storage.Store, set *httptool.Set) (reg *tools.Registry, version string, err error) {
	var all []*tools.Tool
	if cfg.Demo {
		all = append(all, shop.Tools(store)...)
	}
	if set != nil {
		h := sha256.New()
		h.Write([]byte(cfg.Tools))
		for _, t := range set.Tools() {
			all = append(all, t)
			fmt.Fprintf(h, "\n%s %s %s %s", t.Name, t.Risk, t.Description, t.Schema)
		}
		d := set.Digest()
		h.Write(d[:])
		version = hex.EncodeToString(h.Sum(nil))
	}
	reg, err = tools.NewRegistry(all...)
	if err != nil {
		return nil, "", fmt.Errorf("tools: %w", err)
	}
	return reg, version, nil
}

// loadTools reads the tools file and builds the tools in force from it.
func loadTools(cfg config, store *storage.Store) (*tools.Registry, string, *httptool.Set, error) {
	set, err := loadToolsFile(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	reg, version, err := registryOf(cfg, store, set)
	if err != nil {
		set.Close()
		return nil, "", nil, err
	}
	return reg, version, set, nil
}

// systemPrompt is what every run's model is told first: the file's words,
// the demo shop's with --demo, else "" (the neutral default).
func systemPrompt(cfg config) (string, error) {
	if cfg.SystemPrompt == "" {
		if cfg.Demo {
			return shop.SystemPrompt, nil
		}
		return "", nil
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

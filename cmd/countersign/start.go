package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/chat"
)

// The steps of NewApp: what a start loads, builds and starts, in order.

// loadInForce reads the tools file, connecting to its MCP servers, and the
// policy, which must pass its own tests; with --demo it seeds the shop.
// The set it returns, even with an error, is the caller's to close.
func (a *App) loadInForce(ctx context.Context) (core.InForce, error) {
	in, err := sources(a.cfg, a.store).Load(ctx)
	if err != nil {
		return in, err
	}
	for _, u := range in.Set.Upstreams() {
		if !u.Connected {
			a.log.Warn("an MCP server of the tools file is not answering; its tools come when it does (tried again with backoff)",
				"server", u.Name, "err", u.Error)
		}
	}
	if b := a.cfg.business(); b.Seed != nil {
		n, err := b.Seed(ctx, a.store)
		if err != nil {
			return in, fmt.Errorf("seed %s: %w", b.Name, err)
		}
		if n > 0 {
			a.log.Info(b.Name+" seeded", "records", n)
		}
	}
	return in, nil
}

// configs are the core and the web side as the flags set them: the model,
// who may chat (the shop's customers, the demo's), the prompt and how
// people outside are reached.
func (a *App) configs(in core.InForce) (core.Config, web.Config, error) {
	cfg, log := a.cfg, a.log
	model, err := newModel(cfg)
	if err != nil {
		return core.Config{}, web.Config{}, err
	}
	switch {
	case model == llm.Model(llm.None{}):
		log.Info("no --model: Countersign's own chat answers nobody until you choose --model openai or anthropic (or offline, the demo shop's scripted model); the gate API, MCP and the back office need none")
	case cfg.Model == "offline" && cfg.business().Model == nil:
		log.Info("the offline model only talks about the demo shop's tools: Countersign's own chat needs --model openai or anthropic for yours (the gate API works with any agent)")
	}
	provider := cfg.Model
	if provider == "" {
		provider = "none"
		if cfg.business().Model != nil {
			provider = "offline" // the business's own, scripted
		}
	}
	model = telemetry.WatchModel(provider, cmp.Or(cfg.ModelName, provider), model, a.metrics)
	mcpOrigins, err := parseOriginsOf("--mcp-origins", cfg.MCPOrigins)
	if err != nil {
		return core.Config{}, web.Config{}, err
	}
	origins, err := parseOrigins(cfg.WidgetOrigins)
	if err != nil {
		return core.Config{}, web.Config{}, err
	}
	var facts gate.BusinessFacts
	if b := cfg.business(); b.Facts != nil {
		facts = b.Facts(a.store)
	}
	prompt, err := systemPrompt(cfg)
	if err != nil {
		return core.Config{}, web.Config{}, err
	}
	reach, err := cfg.outboxConfig(a.store, log)
	if err != nil {
		return core.Config{}, web.Config{}, err
	}
	ssoCfg, noPasswords, err := cfg.ssoConfig(reach.Base)
	if err != nil {
		return core.Config{}, web.Config{}, err
	}
	return core.Config{Store: a.store, Tools: in.Registry, ToolsVersion: in.ToolsVersion, Policy: in.Policy, Model: model,
			Sources: sources(cfg, a.store), ToolSet: in.Set,
			Business: facts, Log: log, Reach: reach, SystemPrompt: prompt, Metrics: a.metrics,
			PolicyOrigin: versions.Origin{File: cfg.Policy, FileRules: cfg.PolicyFromFile}, PolicyPeople: cfg.PolicyPeople,
			SinglePersonShop: cfg.SinglePersonShop, IntentWindow: cfg.IntentWindow, SignWithPasskey: cfg.SignIn.SignWithPasskey, Limits: gate.Limits{MaxPendingPerRun: cfg.RunMaxWaiting, MaxPendingPerCustomer: cfg.CustomerMaxWaiting,
				MaxPendingPerAgent: cfg.AgentMaxWaiting, MaxPendingPerSession: cfg.SessionMaxWaiting}},
		web.Config{Log: log, Tokens: &chat.Tokens{Secret: cfg.CustomerSecret, Previous: cfg.CustomerSecretPrevious,
			MaxAge: cfg.CustomerTokenMaxAge, Issuer: cfg.CustomerTokenIssuer, Audience: cfg.CustomerTokenAudience, DemoPage: cfg.DemoPage},
			WidgetOrigins: origins, MCPOrigins: mcpOrigins,
			DemoCustomers: tryOutCustomers(cfg.business()), TrustProxy: cfg.TrustProxy, PublicURL: cfg.Reach.PublicURL, Upstreams: a.upstreams,
			MCPWait: cfg.MCPHold, AgentCallsPerSecond: cfg.AgentCallsPerSecond, AgentCallBurst: cfg.AgentCallBurst,
			SSO: ssoCfg, NoPasswordSignIn: noPasswords}, nil
}

// startCore creates the demo staff and starts the core: it recovers what a
// previous process left, records the versions this instance runs and
// starts every background job.
func (a *App) startCore(ctx context.Context) error {
	if err := a.seedStaff(ctx); err != nil {
		return err
	}
	started, err := a.core.Start(context.WithoutCancel(ctx))
	if err != nil {
		a.core.Close()
		return err
	}
	if started.Rerun+started.Unknown > 0 {
		a.log.Warn("recovered interrupted calls", "rerun", started.Rerun, "unknown", started.Unknown)
	}
	if started.Resumed > 0 {
		a.log.Info("resuming runs", "count", started.Resumed)
	}
	return nil
}

// newServer is the HTTP server over the web side. Slow or stuck clients are
// cut off; event streams and exports lift the read and write limits for
// themselves (web.startSSE).
func (a *App) newServer() error {
	cfg := a.cfg
	a.baseCtx, a.stopReqs = context.WithCancel(context.Background())
	a.server = &http.Server{Handler: a.site.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: orDefault(cfg.ReadTimeout, 30*time.Second), WriteTimeout: orDefault(cfg.WriteTimeout, 90*time.Second),
		IdleTimeout: orDefault(cfg.IdleTimeout, 2*time.Minute),
		// Idle keep-alive connections are closed before they can take the
		// descriptors requests need (web.ConnGuard).
		ConnState:   web.NewConnGuard(0).ConnState,
		BaseContext: func(net.Listener) context.Context { return a.baseCtx },
		ErrorLog:    slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		certs, err := loadCertFiles(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return err
		}
		a.server.TLSConfig = certs.tlsConfig()
	}
	return nil
}

package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/business"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/chat"
	"github.com/countersign/countersign/web/mcpgate"
)

// App is the whole server, wired. Tests boot it on port 0.
type App struct {
	cfg      config
	log      *slog.Logger
	store    *storage.Store
	gate     *gate.Gate
	runner   *runloop.Runner
	accounts *accounts.Service
	// core is everything that runs, background jobs included; site the
	// web side's handlers over it.
	core     *core.Core
	site     *web.Server
	server   *http.Server
	baseCtx  context.Context
	stopReqs context.CancelFunc
	listener net.Listener
	stdout   io.Writer
	// demoPage: /demo is served.
	demoPage bool
	// metrics (nil: off) served on metricsSrv; stopTracing flushes and
	// ends the export of traces (nil: off). See observe.go.
	metrics     *telemetry.Metrics
	metricsLn   net.Listener
	metricsSrv  *http.Server
	stopTracing func(context.Context) error
}

// NewApp opens the database, loads and tests the policy, seeds the demo
// shop when asked, and recovers calls a previous process left running:
// each step in turn, undoing those before it when one fails.
func NewApp(ctx context.Context, cfg config, stdout, stderr io.Writer) (*App, error) {
	log, err := newLog(cfg, stderr)
	if err != nil {
		return nil, err
	}
	if err := checkLimits(cfg); err != nil {
		return nil, err
	}
	if cfg.MaxArgs != 0 {
		tools.MaxArgsBytes = cfg.MaxArgs // before anything is served
	}
	store, err := openStore(cfg, log)
	if err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: log, store: store, stdout: stdout}
	undo := []func(){func() { store.Close() }}
	fail := func(err error) (*App, error) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return nil, err
	}
	auditKey, err := loadAnchor(cfg)
	if err != nil {
		return fail(err)
	}
	unobserve, err := a.observe(ctx)
	undo = append(undo, unobserve)
	if err != nil {
		return fail(err)
	}
	loaded, err := a.loadInForce(ctx)
	if err != nil {
		loaded.Set.Close()
		return fail(err)
	}
	ccfg, wcfg, err := a.configs(loaded)
	if err != nil {
		loaded.Set.Close()
		return fail(err)
	}
	ccfg.AuditKey, ccfg.Checkpoints, ccfg.CheckpointEvery = auditKey, cfg.Checkpoints, cfg.CheckpointEvery
	if cfg.ShadowPolicy != "" {
		if ccfg.Shadow, err = ccfg.Sources.Shadow(ctx, loaded.Registry); err != nil {
			loaded.Set.Close()
			return fail(err)
		}
	}
	// The one place the parts are put together (web.Boot, as the tests
	// and the benchmarks do): the core, everything that runs; the web
	// side's handlers over it; then the core started.
	if a.core, a.site, err = web.Boot(ctx, ccfg, wcfg); err != nil {
		loaded.Set.Close()
		return fail(err)
	}
	a.gate, a.runner, a.accounts = a.core.Gate, a.core.Runner, a.core.Accounts
	a.demoPage = a.site.DemoPage()
	if err := a.startCore(ctx); err != nil {
		return fail(err)
	}
	undo = append(undo, a.core.Close)
	if err := a.newServer(); err != nil {
		return fail(err)
	}
	return a, nil
}

// openStore opens --db, with the business's own tables.
func openStore(cfg config, log *slog.Logger) (*storage.Store, error) {
	store, err := storage.Open(cfg.DB, storage.Options{Own: cfg.business().Schema})
	if err != nil {
		return nil, err
	}
	if !store.TextIndexed() {
		log.Warn("the audit's text search has no index: this binary was built without -tags " + storage.BuildTag +
			", so a search reads every call (build it as the README says)")
	}
	return store, nil
}

// newLog is the server's JSON log at --log-level. Libraries that log to
// slog's default (the OAuth provider) log as the server does.
func newLog(cfg config, stderr io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cmp.Or(cfg.LogLevel, "info"))); err != nil {
		return nil, usageError(fmt.Sprintf("--log-level %q: choose debug, info, warn or error", cfg.LogLevel))
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log)
	return log, nil
}

// checkLimits refuses a limit out of its range, naming the flag.
func checkLimits(cfg config) error {
	for name, n := range map[string]int{"--agent-calls-per-second": cfg.AgentCallsPerSecond, "--agent-call-burst": cfg.AgentCallBurst,
		"--agent-max-waiting": cfg.AgentMaxWaiting, "--session-max-waiting": cfg.SessionMaxWaiting,
		"--conversation-max-waiting": cfg.RunMaxWaiting, "--customer-max-waiting": cfg.CustomerMaxWaiting} {
		if n < 0 || n > 1_000_000 {
			return fmt.Errorf("%s is a number from 1 to 1000000 (0: the default)", name)
		}
	}
	if (cfg.IntentWindow < 0 && cfg.IntentWindow != gate.NoIntentWindow) || cfg.IntentWindow > 90*24*time.Hour {
		return usageError(fmt.Sprintf("--intent-window %s: from 0 (off) to 2160h (90 days)", cfg.IntentWindow))
	}
	if cfg.MaxArgs != 0 && (cfg.MaxArgs < 64<<10 || cfg.MaxArgs > 64<<20) {
		return usageError(fmt.Sprintf("--max-args %d: a call's arguments may be from 65536 (64 KiB) to 67108864 (64 MiB) bytes", cfg.MaxArgs))
	}
	if cfg.MCPHold != 0 && (cfg.MCPHold < time.Second || cfg.MCPHold > 10*time.Minute) {
		return usageError(fmt.Sprintf("--mcp-hold %s: hold a waiting call between 1s and 10m", cfg.MCPHold))
	}
	return nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// business is the one business the flags choose (--demo: the demo
// shop), or none: nothing else asks whether this is the demo.
func (cfg config) business() business.Business {
	if cfg.Demo {
		return demo.Shop
	}
	return business.Business{}
}

// tryOutCustomers are the business's customers as /demo offers them.
func tryOutCustomers(b business.Business) []chat.DemoCustomer {
	var out []chat.DemoCustomer
	for _, cu := range b.Customers {
		out = append(out, chat.DemoCustomer(cu))
	}
	return out
}

// seedStaff creates the business's try-out accounts that are missing and
// prints their passwords, once.
func (a *App) seedStaff(ctx context.Context) error {
	for _, d := range a.cfg.business().Staff {
		if _, err := a.store.StaffByEmail(ctx, d.Email); err == nil {
			continue
		}
		password := randomSecret()[:20]
		if _, err := a.accounts.AddStaff(ctx, d.Email, d.Name, d.Role, password, models.Actor{ID: "demo", Name: "demo seed"}); err != nil {
			return fmt.Errorf("demo staff %s: %w", d.Email, err)
		}
		fmt.Fprintf(a.stdout, "demo %-10s %-26s password: %s\n", d.Role, d.Email, password)
	}
	return nil
}

// parseOrigins reads --widget-origins: "https://shop.example, https://www.shop.example".
func parseOrigins(list string) ([]string, error) { return parseOriginsOf("--widget-origins", list) }

// parseOriginsOf reads a flag's comma-separated origins.
func parseOriginsOf(flag, list string) ([]string, error) {
	var out []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("%s: %q is not an origin such as https://shop.example", flag, o)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out, nil
}

func randomSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// Listen binds the address; ":0" picks a free port (see Addr).
func (a *App) Listen() error {
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return err
	}
	if err := a.listenMetrics(); err != nil {
		ln.Close()
		return err
	}
	a.listener = ln
	return nil
}

// Addr is the address the app listens on.
func (a *App) Addr() string { return a.listener.Addr().String() }

// Run serves until ctx ends; SIGHUP reloads the tools file and policy.
func (a *App) Run(ctx context.Context) error {
	if a.listener == nil {
		if err := a.Listen(); err != nil {
			return err
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	hupCtx, stopHup := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHup()
	go a.reloadOnHangup(hupCtx, hup)
	a.log.Info("countersign listening", "addr", a.Addr(), "db", storage.RedactDSN(a.cfg.DB), "policy_version", a.gate.Policy().Version()[:12])
	scheme := "http"
	if a.server.TLSConfig != nil {
		scheme = "https"
	}
	base := scheme + "://" + displayAddr(a.Addr())
	if public := strings.TrimRight(a.cfg.Reach.PublicURL, "/"); public != "" {
		// The address people open it at: signing in with SSO or a passkey
		// works there only.
		fmt.Fprintf(a.stdout, "Countersign is listening on %s\n", base)
		base = public
	}
	fmt.Fprintf(a.stdout, "Countersign is running at %s (health: /healthz)\n", base)
	fmt.Fprintf(a.stdout, "  back office: %s/login\n", base)
	if m := a.MetricsAddr(); m != "" {
		fmt.Fprintf(a.stdout, "  metrics:     http://%s/metrics\n", displayAddr(m))
	}
	if a.demoPage {
		fmt.Fprintf(a.stdout, "  demo shop:   %s/demo (chat as Alice, ask for a $900 refund, approve it in the queue)\n", base)
	}
	a.serveMetrics()
	errc := make(chan error, 1)
	go func() {
		if a.server.TLSConfig != nil {
			errc <- a.server.ServeTLS(a.listener, "", "") // certificates from TLSConfig
			return
		}
		errc <- a.server.Serve(a.listener)
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	a.log.Info("stopping: no new requests; those under way get 10 s to finish")
	// Each call held for a person is answered where it stands (the client
	// asks again: the same action), then the open event streams end, which
	// would hold Shutdown.
	a.core.Outside.StopWaiting()
	answered, cancelAnswered := context.WithTimeout(context.Background(), 5*time.Second)
	a.site.Drain(answered)
	cancelAnswered()
	a.stopReqs()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer a.stopMetrics(shutdown)
	err := a.server.Shutdown(shutdown)
	a.log.Info("stopped", "err", err)
	return err
}

func displayAddr(addr string) string {
	if strings.HasPrefix(addr, "[::]") {
		return "localhost" + strings.TrimPrefix(addr, "[::]")
	}
	if strings.HasPrefix(addr, "0.0.0.0") {
		return "localhost" + strings.TrimPrefix(addr, "0.0.0.0")
	}
	return addr
}

// Close stops background work and closes the database.
func (a *App) Close() error {
	a.core.Close()
	a.flushTraces()
	return a.store.Close()
}

// serverGCPercent is the garbage collector's headroom for `serve`: twice Go's
// default. The server's live heap is small and every tool call allocates a
// little, so collecting half as often costs a few megabytes and gives the gate
// about 15% more calls per second with 16 callers (BENCHMARKS.md).
const serverGCPercent = 200

// tuneGC applies serverGCPercent unless the operator chose with GOGC, and
// says whether it did.
func tuneGC(getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(serverGCPercent)
	return true
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfg := newFlagSet("serve", stderr)
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "the least level logged: debug, info, warn or error")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics at /metrics on this address (off by default; e.g. 127.0.0.1:9464)")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP to this URL (e.g. http://localhost:4318); the OTEL_EXPORTER_OTLP_* variables work too")
	cfg.policyFlag(fs)
	fs.StringVar(&cfg.SystemPrompt, "system-prompt", "", "a file with what the model of every run is told first (default: a neutral support agent's; the demo shop's with --demo)")
	fs.BoolVar(&cfg.PolicyFromFile, "policy-from-file", false, "the --policy file rules: it is put in force at start and on SIGHUP as it is, its review done where the file is kept (GitOps); without it a file that differs from the version in force is proposed, in force once countersigned")
	fs.IntVar(&cfg.AgentCallsPerSecond, "agent-calls-per-second", web.AgentCallsPerSecond, "calls a second one agent key may send after its burst (gate API and /mcp; `agent limits` sets an agent's own)")
	fs.IntVar(&cfg.AgentCallBurst, "agent-call-burst", web.AgentCallBurst, "calls one agent key may send at once before --agent-calls-per-second applies")
	fs.IntVar(&cfg.AgentMaxWaiting, "agent-max-waiting", 50, "calls of one agent that may wait for a person at once, over all its sessions")
	fs.IntVar(&cfg.SessionMaxWaiting, "session-max-waiting", 10, "calls of one agent session that may wait for a person at once")
	fs.IntVar(&cfg.RunMaxWaiting, "conversation-max-waiting", 3, "requests of one chat conversation that may wait for a person at once")
	fs.IntVar(&cfg.CustomerMaxWaiting, "customer-max-waiting", 10, "requests of one customer that may wait for a person at once")
	fs.IntVar(&cfg.PolicyPeople, "policy-people", 0, "how many admins sign a policy change, its author counted (1 only with --single-person-shop); the first instance on a database sets it (2 when not given), later ones must agree or leave it out; `countersign policy people N` changes it")
	fs.BoolVar(&cfg.SinglePersonShop, "single-person-shop", false, "allows --policy-people 1: an admin puts their own policy change in force, and /policy says so")
	fs.StringVar(&cfg.ShadowPolicy, "shadow-policy", "", "a policy file tried beside the one in force: it decides nothing, and /policy shows where it disagrees")
	fs.StringVar(&cfg.Model, "model", "", "model provider: openai, anthropic or offline (the demo shop's scripted model; the default with --demo, none without)")
	fs.StringVar(&cfg.ModelName, "model-name", "", "model to ask for (openai: gpt-4o-mini, anthropic: claude-sonnet-4-5 by default)")
	fs.StringVar(&cfg.ModelBaseURL, "model-base-url", "", "base URL of an OpenAI-compatible server (Ollama: http://localhost:11434/v1/)")
	fs.StringVar(&cfg.ModelAPIKey, "model-api-key", "", "API key of the model provider (never logged, never shown to the model)")
	fs.DurationVar(&cfg.ModelTimeout, "model-timeout", 60*time.Second, "time limit of one model request, retries included")
	fs.StringVar(&cfg.CustomerSecret, "customer-secret", "", "HS256 secret shops sign customer tokens with")
	fs.StringVar(&cfg.CustomerSecretPrevious, "customer-secret-previous", "", "during a rotation: the old secret, whose tokens are still accepted")
	fs.BoolVar(&cfg.DemoPage, "demo-page", false, "with --demo and a customer secret: show /demo anyway (it signs with a secret of its own, for the demo customers only)")
	fs.DurationVar(&cfg.CustomerTokenMaxAge, "customer-token-max-age", chat.DefaultTokenMaxLifetime, "refuse customer tokens meant to live longer (exp minus iat)")
	fs.StringVar(&cfg.CustomerTokenIssuer, "customer-token-issuer", "", "when set, customer tokens must carry this iss")
	fs.StringVar(&cfg.CustomerTokenAudience, "customer-token-audience", "", "when set, customer tokens must carry this aud")
	fs.StringVar(&cfg.WidgetOrigins, "widget-origins", "", "origins allowed to embed the chat widget, comma separated")
	fs.StringVar(&cfg.MCPOrigins, "mcp-origins", "", "origins of web pages allowed to call /mcp from a browser, comma separated (others get 403; clients that are not browsers send no Origin)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM, chain included); renewals are picked up without a restart")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "the certificate's private key (PEM)")
	cfg.anchorFlags(fs)
	fs.DurationVar(&cfg.CheckpointEvery, "checkpoint-every", time.Hour, "how often to write an audit checkpoint (when the chain has grown)")
	fs.DurationVar(&cfg.IntentWindow, "intent-window", models.IntentWindow, "how long after a person decided a call the same call asked again by the same agent is answered with that outcome instead of becoming a second action (0: off)")
	fs.IntVar(&cfg.MaxArgs, "max-args", tools.DefaultMaxArgsBytes, "the largest arguments a tool call may carry, in bytes (64 KiB to 64 MiB), over the gate API and /mcp")
	fs.DurationVar(&cfg.MCPHold, "mcp-hold", mcpgate.DefaultWait, "how long /mcp and the stdio bridge hold a call that waits for a person before answering that it waits (1s to 10m)")
	fs.BoolVar(&cfg.TrustProxy, "trust-proxy", false, "behind a reverse proxy: take the client address, scheme and host from X-Forwarded-For/-Proto/-Host (only if the proxy sets them)")
	cfg.reachFlags(fs)
	cfg.signInFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.IntentWindow == 0 {
		cfg.IntentWindow = gate.NoIntentWindow // said on the command line: off
	}
	tuneGC(os.Getenv)
	app, err := NewApp(ctx, *cfg, stdout, stderr)
	if err != nil {
		return err
	}
	defer app.Close()
	return app.Run(ctx)
}

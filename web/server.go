package web

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/backoffice"
	"github.com/countersign/countersign/web/chat"
	"github.com/countersign/countersign/web/doorkit"
	"github.com/countersign/countersign/web/oauth"
)

// Config is what the server is built from.
type Config struct {
	Log *slog.Logger
	// Tokens are the shop's settings for its customers' tokens: Boot
	// settles them (chat.Tokens.Settle) into Customers, DemoSecret and
	// ChatGrantSeed, with the secrets the database keeps. nil: those three
	// as given (tests give their own).
	Tokens    *chat.Tokens
	Customers *chat.CustomerVerifier
	// WidgetOrigins may embed the chat frame (frame-ancestors).
	WidgetOrigins []string
	// MCPOrigins are web pages' origins (scheme://host) allowed to call
	// /mcp from a browser, beside the server's own.
	MCPOrigins []string
	// DemoSecret signs demo customer tokens for /demo, and is never the
	// shop's customer secret; empty: no demo page. Customers must accept
	// it for the demo customers (CustomerVerifier.AcceptDemo).
	DemoSecret string
	// DemoCustomers are who /demo lets a visitor be.
	DemoCustomers []chat.DemoCustomer
	// TrustProxy takes the client address from X-Forwarded-For, and whether
	// the browser used HTTPS and which host it asked for from
	// X-Forwarded-Proto and X-Forwarded-Host (set it only behind a proxy that
	// sets those headers); otherwise the connection counts, so neither rate
	// limits nor cookie and origin checks can be steered with a header.
	TrustProxy bool
	// PublicURL is the address clients reach this server at (--public-url):
	// the OAuth issuer and /mcp's resource; "": from each request.
	PublicURL string
	// SSO signs staff in with the company's OpenID Provider (nil: none).
	SSO *backoffice.SSOConfig
	// NoPasswordSignIn turns password sign-in off (--password-sign-in
	// off): staff sign in through SSO; the host's CLI stays for break-glass.
	NoPasswordSignIn bool
	// OAuthDocuments fetches OAuth clients' metadata documents (nil: public
	// addresses only; tests give one trusting their own server).
	OAuthDocuments *http.Client
	// ReplyWait is how long a request that starts model work waits for the
	// reply before answering with the run as it stands.
	ReplyWait time.Duration
	// ChatGrantSeed, when set, makes the chat frames' grants valid across
	// restarts and instances (the app derives it from the customer secret,
	// or without one from a secret kept in the database);
	// empty: a key of this process.
	ChatGrantSeed []byte
	// MaxStreams and MaxStreamsPerAddress cap open event streams; 0 takes
	// the defaults.
	MaxStreams, MaxStreamsPerAddress int
	// MCPWait is how long /mcp holds a call that needs a person before it
	// answers that the call waits (0: 50 s).
	MCPWait time.Duration
	// MCPQuestionTTL is how long what a 2025 MCP server asks a 2026-07-28
	// client during a call waits for the client's answer (0: 10 min).
	MCPQuestionTTL time.Duration
	// MaxHeld and MaxHeldPerAgent cap requests held open (long polls, MCP
	// requests and streams), in all and per agent key (0: MaxHeld,
	// MaxHeldPerAgent); MaxMCPSessionsPerAgent caps an agent's open MCP
	// sessions (0: mcpgate.MaxSessionsPerAgent), and MCPSessionIdle ends a
	// session nobody used for that long (0: mcpgate.SessionIdle).
	MaxHeld, MaxHeldPerAgent, MaxMCPSessionsPerAgent int
	MCPSessionIdle                                   time.Duration
	// BodyBudget bounds the bytes of agents' call bodies held at once, and
	// BodyBudgetWait how long a body waits for room (0: the defaults).
	BodyBudget     int64
	BodyBudgetWait time.Duration
	// AgentCallsPerSecond and AgentCallBurst limit what one agent key
	// sends (gate API calls, MCP requests): so many a second after a burst
	// of so many (0: AgentCallsPerSecond, AgentCallBurst); on PostgreSQL the
	// limit is every instance's together.
	AgentCallsPerSecond, AgentCallBurst int
	// Upstreams says how the MCP servers of the tools file are doing, for
	// the tools page (nil: there are none).
	Upstreams func() []tools.UpstreamStatus
	// AuditSearchTimeout bounds an audit page whose filter searches text
	// in the arguments (a scan over the calls); default 15 s.
	AuditSearchTimeout time.Duration
}

// overTLS tells whether the browser reached Countersign over HTTPS: directly,
// or through a proxy trusted with --trust-proxy that says so in
// X-Forwarded-Proto (a proxy that ends TLS talks plain HTTP to us). Cookies
// are Secure, and the chat cookie works inside a shop's page, only then.
func (s *Server) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return s.cfg.TrustProxy && strings.EqualFold(lastForwarded(r.Header.Get("X-Forwarded-Proto")), "https")
}

// publicHost is the host the browser asked for, which the Origin of its
// posts must name: the Host header, or a trusted proxy's X-Forwarded-Host.
func (s *Server) publicHost(r *http.Request) string {
	if s.cfg.TrustProxy {
		if h := lastForwarded(r.Header.Get("X-Forwarded-Host")); h != "" {
			return h
		}
	}
	return r.Host
}

// lastForwarded is the last of a comma-separated forwarding header's values:
// the one our own proxy set (what comes before it came from further away,
// perhaps from the client itself).
func lastForwarded(v string) string {
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	return strings.TrimSpace(v)
}

// BodyLimit caps every request body but a proposed policy's.
const BodyLimit = "64K"

// tooBigForAgent says what an agent's call over doorkit.BodyLimit is told.
func tooBigForAgent() string {
	return fmt.Sprintf("the body is over the limit of %d bytes (a call's arguments are at most %d bytes)", doorkit.BodyLimit(), tools.MaxArgsBytes)
}

// agentCall is a request of an agent's call. /mcp caps its own body
// (mcpgate), to answer in MCP's words.
func agentCall(c echo.Context) bool {
	r := c.Request()
	return r.Method == http.MethodPost && r.URL.Path == views.PathAPICalls
}

// mcpPost is a POST to /mcp.
func mcpPost(c echo.Context) bool {
	return c.Request().Method == http.MethodPost && c.Request().URL.Path == views.PathMCP
}

// PolicyBodyLimit caps a proposed policy's request: the policy is at most
// 256 KiB (versions.MaxYAML), as JSON or a form, with its note.
const PolicyBodyLimit = "600K"

// policyUpload says whether a request proposes a policy version.
func policyUpload(c echo.Context) bool {
	r := c.Request()
	return r.Method == http.MethodPost && (r.URL.Path == views.PathPolicyVersions || r.URL.Path == views.PathAPIPolicyVersions)
}

// Server is the HTTP side of Countersign: the back office and the doors,
// mounted over one Echo server, and what the doors' kit asks of it (held
// requests, the body budget, stream caps, the agents' rate).
type Server struct {
	echo *echo.Echo
	cfg  Config
	core *core.Core
	// kit is what every door shares (web/doorkit).
	kit *doorkit.Kit
	// office is the staff's side (web/backoffice).
	office *backoffice.Office
	// Calls per agent key (the gate API and MCP).
	agentCalls *doorkit.Limiter
	// Open event streams, in all and per address.
	streams *streamCounter
	// holds caps requests held open (holds.go).
	holds *holds
	// bodies bounds the call bodies held at once (body_budget.go).
	bodies *bodyBudget
}

// Boot builds the one root: the core over c (everything that runs, and
// every background job by name), the company's SSO group mapping settled
// in its database, then the web side over it (New). `countersign serve`,
// the tests and the benchmark programs all boot through it; Start and
// Close are the core's.
func Boot(ctx context.Context, c core.Config, w Config) (*core.Core, *Server, error) {
	co, err := core.New(c)
	if err != nil {
		return nil, nil, err
	}
	if w.Tokens != nil {
		log := cmp.Or(w.Log, slog.New(slog.DiscardHandler))
		settled, err := w.Tokens.Settle(ctx, co.Store, w.DemoCustomers, log)
		if err != nil {
			co.Close()
			return nil, nil, err
		}
		w.Customers, w.DemoSecret, w.ChatGrantSeed = settled.Customers, settled.DemoSecret, settled.GrantSeed
	}
	if w.SSO != nil {
		// The group mapping is the deployment's, kept in the database.
		if err := co.Accounts.SettleGroups(ctx, w.SSO.Groups, core.Hostname()); err != nil {
			co.Close()
			return nil, nil, err
		}
	}
	return co, New(co, w), nil
}

// New builds the web side over the core: the back office, the doors,
// their middleware and routes. It builds nothing of the core; it listens
// on the core's bus, and its background jobs are the core's to start and
// stop (Core.Job), so New comes before Core.Start.
func New(c *core.Core, cfg Config) *Server {
	cfg.defaults()
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = echo.ExtractIPDirect()
	if cfg.TrustProxy {
		e.IPExtractor = echo.ExtractIPFromXFFHeader()
	}
	// The limits live where every instance shares them on PostgreSQL.
	kit := &doorkit.Kit{Core: c, Log: cfg.Log, Decode: decodeJSON, Shared: doorkit.SharedLimits(c.Store, cfg.Log)}
	s := &Server{echo: e, cfg: cfg, core: c, kit: kit,
		agentCalls: kit.Limiter(time.Second/time.Duration(cfg.AgentCallsPerSecond), cfg.AgentCallBurst, "agent_calls"),
		streams:    newStreamCounter(cfg.MaxStreams, cfg.MaxStreamsPerAddress),
		holds:      newHolds(cfg.MaxHeld, cfg.MaxHeldPerAgent),
		bodies:     newBodyBudget(cfg.BodyBudget, cfg.BodyBudgetWait)}
	kit.Hold, kit.Bodies = s.holdRequest, s.bodies.hold
	kit.PublicHost, kit.OverTLS, kit.LimitStreams = s.publicHost, s.overTLS, s.limitStreams
	kit.Allow = func(ag *models.Agent) error {
		if !s.agentAllowed(ag) {
			return s.agentTooFast(ag)
		}
		return nil
	}
	c.Bus.Listen(s.holds) // a revoked agent's held requests end
	od := oauth.Mount(e, kit, oauth.DoorOptions{PublicURL: cfg.PublicURL, Documents: cfg.OAuthDocuments})
	kit.RequireAgent = od.RequireAgent // MCP takes OAuth's tokens as agent keys
	s.office = backoffice.New(c, kit, od, backoffice.Options{Log: cfg.Log, PublicURL: cfg.PublicURL, SSO: cfg.SSO,
		NoPasswordSignIn: cfg.NoPasswordSignIn, Upstreams: cfg.Upstreams, AuditSearchTimeout: cfg.AuditSearchTimeout})
	if kit.Shared != nil {
		// Every door's limits, those mounted after this too.
		c.Job("prune shared rate limits", func(ctx context.Context) { doorkit.PruneShared(ctx, kit.Limiters()) })
	}
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RequestID())
	e.Use(logRequests(cfg.Log))
	e.Use(middleware.Recover())
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: BodyLimit, Skipper: func(c echo.Context) bool { return policyUpload(c) || agentCall(c) || mcpPost(c) }}))
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: fmt.Sprint(doorkit.BodyLimit()), Skipper: func(c echo.Context) bool { return !agentCall(c) }}))
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: PolicyBodyLimit, Skipper: func(c echo.Context) bool { return !policyUpload(c) }}))
	e.Use(backoffice.SecurityHeaders)
	e.Use(s.office.LoadStaff)
	s.routes()
	return s
}

// defaults fills what the configuration leaves zero.
func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = MaxStreams
	}
	if c.MaxStreamsPerAddress == 0 {
		c.MaxStreamsPerAddress = MaxStreamsPerAddress
	}
	if c.MaxHeld == 0 {
		c.MaxHeld = MaxHeld
	}
	if c.MaxHeldPerAgent == 0 {
		c.MaxHeldPerAgent = MaxHeldPerAgent
	}
	if c.BodyBudget == 0 {
		c.BodyBudget = BodyBudget
	}
	if c.BodyBudgetWait == 0 {
		c.BodyBudgetWait = BodyBudgetWait
	}
	if c.AgentCallsPerSecond == 0 {
		c.AgentCallsPerSecond = AgentCallsPerSecond
	}
	if c.AgentCallBurst == 0 {
		c.AgentCallBurst = AgentCallBurst
	}
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// DemoPage tells whether /demo is served.
func (s *Server) DemoPage() bool { return s.cfg.DemoSecret != "" }

func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, msg := http.StatusInternalServerError, fault.Internal, fault.Message(err)
	if he, ok := err.(*echo.HTTPError); ok {
		status = he.Code
		code = codeForStatus(status)
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(status)
		}
		if status == http.StatusRequestEntityTooLarge {
			msg = "the body is over the limit of " + BodyLimit + "B"
			if policyUpload(c) {
				msg = "the body is over the limit of " + PolicyBodyLimit + "B (a policy is at most 256 KiB)"
			}
			if agentCall(c) {
				msg = tooBigForAgent()
			}
		}
	} else {
		code = fault.CodeOf(err)
		status = doorkit.HTTPStatus(code)
	}
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && c.Response().Header().Get("Retry-After") == "" {
		c.Response().Header().Set("Retry-After", "5")
	}
	if status >= 500 {
		s.cfg.Log.Error("request failed", "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "route", c.Path(), "err", err)
	}
	if p := c.Request().URL.Path; strings.HasPrefix(p, "/api/") || p == views.PathMCP {
		_ = c.JSON(status, map[string]any{"error": map[string]string{"code": string(code), "message": msg}})
		return
	}
	_ = doorkit.Render(c, status, views.ErrorPage(views.ErrorView{Status: status, Title: http.StatusText(status), Message: doorkit.Sentence(msg)}))
}

func codeForStatus(status int) fault.Code {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return fault.Invalid
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return fault.NotFound
	case http.StatusConflict:
		return fault.Conflict
	case http.StatusForbidden:
		return fault.Forbidden
	case http.StatusUnauthorized:
		return fault.Unauthorized
	case http.StatusTooManyRequests:
		return fault.RateLimited
	case http.StatusServiceUnavailable:
		return fault.Unavailable
	}
	return fault.Internal
}

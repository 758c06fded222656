// Package doorkit is what every door agents come in by needs, shared: the
// agent key's check, the agent's own rate, the caps on requests held open
// (and their end when the key is revoked), the body budget, strict JSON,
// and the call as the agent that asked sees it. A door (the gate API,
// web/gateapi) is a package of handlers over the core and this kit; the
// web side builds one Kit and mounts each door with one line of its route
// table.
package doorkit

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
)

// Kit is the shared part of the agent doors; the web side fills it.
type Kit struct {
	Core *core.Core
	Log  *slog.Logger
	// Decode reads a request's JSON body strictly (no unknown fields, one
	// object, within the body limit), with errors that say what to fix.
	Decode func(c echo.Context, v any) error
	// Allow takes one of an agent's calls from its rate (nil: allowed;
	// else the error to answer, 429 with its words).
	Allow func(ag *models.Agent) error
	// Hold serves a request held open for the current agent inside the
	// caps (per agent and in all; over them it answers 429 or 503), ended
	// when its key is revoked. stream: an event stream, which ends only
	// with the client or the server.
	Hold func(c echo.Context, stream bool, serve func() error) error
	// Bodies holds a large request body's bytes within the server's
	// budget; a call refused for want of room is answered by refuse with
	// the words to say (nil: a 503 with them).
	Bodies func(refuse Refuse) echo.MiddlewareFunc
	// RequireAgent lets through requests with an agent key or an OAuth
	// access token of an authorized client, as the agent it acts as
	// (Agent); a door that takes OAuth tokens (MCP) uses it instead of
	// RequireAgentKey.
	RequireAgent echo.MiddlewareFunc
	// PublicHost is the host the client asked for (the Host header, or a
	// trusted proxy's X-Forwarded-Host), which a browser's Origin names.
	PublicHost func(r *http.Request) string
	// OverTLS says whether the browser reached Countersign over HTTPS
	// (directly, or through a trusted proxy that says so).
	OverTLS func(r *http.Request) bool
	// LimitStreams caps the event streams open at once, in all and per
	// client address (route middleware of every stream).
	LimitStreams echo.MiddlewareFunc
	// Shared keeps the limits in the database every instance uses (nil:
	// in this process: SQLite, one instance).
	Shared *SharedBuckets

	mu       sync.Mutex
	limiters []*Limiter
}

// Limiter is a new limit of a door's (so many at once, then one every so
// often, per key), shared by the instances as name; the web side prunes
// what every limit made keeps in the database (Limiters).
func (k *Kit) Limiter(every time.Duration, burst int, name string) *Limiter {
	l := NewLimiter(every, burst, 0).ShareAs(k.Shared, name)
	k.mu.Lock()
	k.limiters = append(k.limiters, l)
	k.mu.Unlock()
	return l
}

// Limiters are the limits made with Limiter.
func (k *Kit) Limiters() []*Limiter {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.limiters)
}

// Refuse answers a request refused before it was read, in the door's own
// words.
type Refuse func(c echo.Context, body io.Reader, words string) error

// BodyLimit caps the body of an agent's call (the gate API's POST
// /api/v1/calls and a POST to /mcp): its arguments may be up to
// tools.MaxArgsBytes, escaped (each byte at most twice over in what SDKs
// send), in an envelope.
func BodyLimit() int64 { return 2*int64(tools.MaxArgsBytes) + 64<<10 }

// LongWriteTimeout is how long a held request or a download may take to
// be written, instead of the server's usual write timeout.
const LongWriteTimeout = 30 * time.Minute

// LongWrite gives a response that may be held (or a download) more time
// than an ordinary one.
func LongWrite(c echo.Context) {
	_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Now().Add(LongWriteTimeout))
}

type agentKey struct{}

// RequireAgentKey lets through requests with a valid agent key, as the
// agent it names (Agent).
func (k *Kit) RequireAgentKey(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		if !ok || strings.TrimSpace(key) == "" {
			return fault.Errorf(fault.Unauthorized, "send an agent key as Authorization: Bearer <key> (countersign agent add)")
		}
		ag, err := k.Core.Accounts.AgentForKey(c.Request().Context(), key)
		if err != nil {
			return err
		}
		return next(WithAgent(c, ag))
	}
}

// WithAgent is c with the agent that asks.
func WithAgent(c echo.Context, ag *models.Agent) echo.Context {
	c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), agentKey{}, ag)))
	return c
}

// Agent is the agent that asks (nil: none).
func Agent(c echo.Context) *models.Agent {
	ag, _ := c.Request().Context().Value(agentKey{}).(*models.Agent)
	return ag
}

// HandedOver records when the agent was first handed the outcome of a
// call that waited for a person, for the record. Best effort: it decides
// nothing.
func (k *Kit) HandedOver(ctx context.Context, call *models.ToolCall) {
	if err := k.Core.Outside.HandedOver(ctx, call); err != nil {
		k.Log.Warn("could not record that an agent was handed an outcome", "call_id", call.ID, "err", err)
	}
}

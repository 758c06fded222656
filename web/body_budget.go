package web

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"

	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/web/doorkit"
)

// The bytes of agents' call bodies held at once, across every request and
// every agent: --max-args bounds one body, and held-request caps how many
// an agent keeps open, but 64 open requests of a 64 MiB limit each (read,
// decoded and normalized at several times their size) would hold tens of
// GiB. Each body over smallBody reserves its length (the most it may be
// when it does not say) before it is read, after its agent was known;
// a body that finds no room within BodyBudgetWait is answered 503 with
// Retry-After, and nothing was done.

// BodyBudget is the default bound on call body bytes held at once (it is
// never less than one body of the largest size).
const BodyBudget = 256 << 20

// BodyBudgetWait is how long a body waits for room before it is refused.
const BodyBudgetWait = 5 * time.Second

// smallBody is what a body may be without reserving: the everyday call.
const smallBody = 64 << 10

type bodyBudget struct {
	sem   *semaphore.Weighted
	total int64
	wait  time.Duration
	held  atomic.Int64 // bytes reserved now
}

func newBodyBudget(total int64, wait time.Duration) *bodyBudget {
	total = max(total, doorkit.BodyLimit())
	return &bodyBudget{sem: semaphore.NewWeighted(total), total: total, wait: wait}
}

// hold is route middleware, after the agent's key was checked; a call
// refused for want of room is answered by refuse (nil: a 503).
func (b *bodyBudget) hold(refuse doorkit.Refuse) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Method != http.MethodPost {
				return next(c)
			}
			n, limit := r.ContentLength, doorkit.BodyLimit()
			if n < 0 || n > limit {
				n = limit // unsaid, or refused by the limit when read: the most it may hold
			}
			if n <= smallBody {
				return next(c)
			}
			ctx, cancel := context.WithTimeout(r.Context(), b.wait)
			err := b.sem.Acquire(ctx, n)
			cancel()
			if err != nil {
				words := fmt.Sprintf("Countersign is holding as many large calls as it takes at once (%d MiB of arguments): nothing was done; send this call again in a few seconds", b.total>>20)
				c.Response().Header().Set("Retry-After", fmt.Sprint(max(int(b.wait/time.Second), 1)))
				c.Response().Header().Set("Connection", "close") // the rest of the body is not read
				if refuse != nil {
					return refuse(c, r.Body, words)
				}
				return &fault.Error{Code: fault.Unavailable, Message: words}
			}
			b.held.Add(n)
			defer func() { b.held.Add(-n); b.sem.Release(n) }()
			return next(c)
		}
	}
}

// BodyBytesHeld is how many bytes of large call bodies are reserved now
// (the metric a test waits on: a body is being read).
func (s *Server) BodyBytesHeld() int64 { return s.bodies.held.Load() }

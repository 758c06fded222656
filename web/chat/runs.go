package chat

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/web/doorkit"
)

// MaxStreamsPerRun caps the open SSE streams of one run.
const MaxStreamsPerRun = 5

type runCtxKey struct{}

// requireRunToken lets a request through only with the run token of the run
// it names. A wrong token and an unknown run look the same from outside.
func (d *Door) requireRunToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		auth := c.Request().Header.Get(echo.HeaderAuthorization)
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			return fault.Errorf(fault.Unauthorized, "send the run token as Authorization: Bearer <run_token>")
		}
		run, err := d.core.Store.RunByTokenHash(c.Request().Context(), models.HashToken(strings.TrimSpace(token)))
		if err != nil || run.ID != c.Param("id") {
			return fault.Errorf(fault.NotFound, "conversation not found, or the run token does not open it")
		}
		ctx := context.WithValue(c.Request().Context(), runCtxKey{}, run)
		c.SetRequest(c.Request().WithContext(ctx))
		return next(c)
	}
}

func runFrom(c echo.Context) *models.Run {
	return c.Request().Context().Value(runCtxKey{}).(*models.Run)
}

type createRunRequest struct {
	Message       string `json:"message"`
	CustomerToken string `json:"customer_token"`
}

// runCreate opens a run: POST /api/v1/runs.
func (d *Door) runCreate(c echo.Context) error {
	if !d.perAddress.Allow(c.RealIP()) {
		return tooFast()
	}
	var req createRunRequest
	if err := d.kit.Decode(c, &req); err != nil {
		return err
	}
	start := runloop.StartRequest{Channel: "api", Message: req.Message}
	if req.CustomerToken != "" {
		cust, err := d.opts.Customers.Verify(req.CustomerToken)
		if err != nil {
			return err
		}
		start.CustomerID, start.CustomerName = cust.ID, cust.Name
	}
	st, err := d.core.Runner.StartRun(c.Request().Context(), start)
	if err != nil {
		return err
	}
	d.await(c, st.Done)
	run, err := d.runView(c.Request().Context(), st.Run.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"run": run, "run_token": st.Token})
}

// await gives the run loop a moment to answer, so that a simple client gets
// the reply in the response; a slow model's reply arrives on the stream.
func (d *Door) await(c echo.Context, done <-chan struct{}) {
	t := time.NewTimer(d.opts.ReplyWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-c.Request().Context().Done():
	}
}

func (d *Door) runView(ctx context.Context, id string) (runJSON, error) {
	run, err := d.core.Store.Run(ctx, id)
	if err != nil {
		return runJSON{}, fault.Errorf(fault.NotFound, "conversation not found")
	}
	turns, err := d.core.Store.Turns(ctx, id, 0)
	if err != nil {
		return runJSON{}, err
	}
	calls, err := d.core.Store.RunCalls(ctx, id)
	if err != nil {
		return runJSON{}, err
	}
	ids := make([]string, 0, len(calls))
	for _, c := range calls {
		ids = append(ids, c.ID)
	}
	receipts, err := d.core.Store.ReceiptsOf(ctx, ids)
	if err != nil {
		return runJSON{}, err
	}
	return toRunJSON(run, turns, calls, receipts), nil
}

// runGet reads a run: GET /api/v1/runs/:id.
func (d *Door) runGet(c echo.Context) error {
	run, err := d.runView(c.Request().Context(), runFrom(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"run": run})
}

type postMessageRequest struct {
	Text string `json:"text"`
}

// runMessage adds a customer message: POST /api/v1/runs/:id/messages.
func (d *Door) runMessage(c echo.Context) error {
	if !d.perAddress.Allow(c.RealIP()) || !d.perRun.Allow(runFrom(c).ID) {
		return tooFast()
	}
	var req postMessageRequest
	if err := d.kit.Decode(c, &req); err != nil {
		return err
	}
	done, err := d.core.Runner.PostMessage(c.Request().Context(), runFrom(c).ID, req.Text)
	if err != nil {
		return err
	}
	d.await(c, done)
	run, err := d.runView(c.Request().Context(), runFrom(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"run": run})
}

// runEvents streams a run's new turns and status changes as server-sent
// events: GET /api/v1/runs/:id/events. Each turn event carries its sequence
// number as the event id, so a client that reconnects with Last-Event-ID
// gets exactly what it missed.
func (d *Door) runEvents(c echo.Context) error {
	run := runFrom(c)
	ctx := c.Request().Context()
	sub, ok := d.runs.Subscribe(run.ID, MaxStreamsPerRun)
	if !ok {
		return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: fmt.Sprintf("this conversation already has %d open streams; close one first", MaxStreamsPerRun)}
	}
	defer d.runs.Unsubscribe(sub)

	var after int64
	if v := c.Request().Header.Get("Last-Event-ID"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	} else if v := c.QueryParam("after"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	}
	w := doorkit.StartSSE(c)

	// Subscribed first, then the backlog: nothing falls between the two.
	backlog, err := d.core.Store.Turns(ctx, run.ID, after)
	if err != nil {
		return nil
	}
	calls, _ := d.core.Store.RunCalls(ctx, run.ID)
	last := after
	for i := range backlog {
		if err := doorkit.WriteSSE(w, strconv.FormatInt(backlog[i].Seq, 10), "turn", toTurnJSON(&backlog[i], calls)); err != nil {
			return nil
		}
		last = backlog[i].Seq
	}
	current, err := d.core.Store.Run(ctx, run.ID)
	if err == nil {
		_ = doorkit.WriteSSE(w, "", "status", map[string]string{"status": string(current.Status)})
	}
	// A closed channel means the client was too slow: it reconnects with
	// Last-Event-ID and gets what it missed.
	doorkit.Follow(ctx, w, sub.C, func(ev runloop.Event) bool {
		if ev.Turn != nil {
			if ev.Turn.Seq <= last {
				return true // already sent from the backlog
			}
			last = ev.Turn.Seq
			if err := doorkit.WriteSSE(w, strconv.FormatInt(ev.Turn.Seq, 10), "turn", toTurnJSON(ev.Turn, nil)); err != nil {
				return false
			}
		}
		if ev.Status != "" {
			if err := doorkit.WriteSSE(w, "", "status", map[string]string{"status": string(ev.Status)}); err != nil {
				return false
			}
		}
		return true
	})
	return nil
}

// tooFast is the answer to a client over its rate limit.
func tooFast() error {
	return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: "too many messages in a short time; wait a moment and try again"}
}

package web

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/views"
)

// QueueLimit caps the rows of the queue page.
const QueueLimit = 500

func (s *Server) queueRows(ctx context.Context) ([]views.ActionRow, error) {
	rows, err := s.cfg.Store.PendingActions(ctx, QueueLimit)
	if err != nil {
		return nil, err
	}
	out := make([]views.ActionRow, len(rows))
	for i := range rows {
		out[i] = actionRowView(&rows[i])
	}
	return out, nil
}

// renderQueueRows renders the rows once for every open queue stream.
func (s *Server) renderQueueRows(ctx context.Context) ([]byte, error) {
	rows, err := s.queueRows(ctx)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := views.QueueRows(rows).Render(ctx, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (s *Server) queuePage(c echo.Context) error {
	rows, err := s.queueRows(c.Request().Context())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.Queue(views.QueueView{Rows: rows}))
}

// queueEvents streams the queue rows whenever an action changes.
func (s *Server) queueEvents(c echo.Context) error {
	ch, stop := s.hub.SubscribeQueue()
	defer stop()
	w := startSSE(c)
	ctx := c.Request().Context()
	// A fresh render first: the page may be older than the stream.
	if html, err := s.renderQueueRows(ctx); err == nil {
		if _, err := w.Write(sseData("queue", html)); err != nil {
			return nil
		}
		w.Flush()
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case html := <-ch:
			if _, err := w.Write(sseData("queue", html)); err != nil {
				return nil
			}
			w.Flush()
		case <-heartbeat.C:
			if !keepAlive(w) {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// keepAlive writes an SSE comment so that proxies keep the stream open; it
// reports whether the client is still there.
func keepAlive(w *echo.Response) bool {
	if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
		return false
	}
	w.Flush()
	return true
}

// startSSE writes the headers of an event stream.
func startSSE(c echo.Context) *echo.Response {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	return w
}

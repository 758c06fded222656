package doorkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Follow is every event stream's loop: each value from ch goes to
// send, a comment every 15 s keeps proxies from closing a quiet stream, and
// the loop ends when the client leaves, the channel closes, or send (or
// the keep-alive) cannot write.
func Follow[T any](ctx context.Context, w *echo.Response, ch <-chan T, send func(T) bool) {
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case v, open := <-ch:
			if !open || !send(v) {
				return
			}
		case <-heartbeat.C:
			if !KeepAlive(w) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// StartSSE writes the headers of an event stream. The server's read and
// write timeouts, which end slow or stuck requests, do not apply to it: a
// stream is meant to stay open, and ends when the client leaves.
func StartSSE(c echo.Context) *echo.Response {
	w := c.Response()
	rc := http.NewResponseController(w.Writer)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	return w
}

// SSEData writes HTML as one SSE message: every line gets its own "data:".
func SSEData(event string, html []byte) []byte {
	var b bytes.Buffer
	b.WriteString("event: " + event + "\n")
	for _, line := range bytes.Split(bytes.TrimRight(html, "\n"), []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// KeepAlive writes an SSE comment so that proxies keep the stream open; it
// reports whether the client is still there.
func KeepAlive(w *echo.Response) bool {
	if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
		return false
	}
	w.Flush()
	return true
}

// WriteSSE writes v as one event, as JSON, with its id (none: "").
func WriteSSE(w *echo.Response, id, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	w.Flush()
	return nil
}

package web

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/countersign/countersign/web/doorkit"
	"github.com/labstack/echo/v4"
)

// Event streams stay open for as long as a page does, so each holds a
// connection and a goroutine: their number is capped in all and per client
// address, so that one client cannot hold them all.
const (
	// MaxStreams caps the event streams open at once.
	MaxStreams = 2000
	// MaxStreamsPerAddress caps those of one client address (an office
	// behind one address has a few people with a few tabs each).
	MaxStreamsPerAddress = 40
)

type streamCounter struct {
	mu     sync.Mutex
	total  int
	byAddr map[string]int
	max    int
	perIP  int
}

func newStreamCounter(max, perIP int) *streamCounter {
	return &streamCounter{byAddr: map[string]int{}, max: max, perIP: perIP}
}

func (sc *streamCounter) acquire(addr string) (release func(), err error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.byAddr[addr] >= sc.perIP {
		return nil, &echo.HTTPError{Code: http.StatusTooManyRequests,
			Message: fmt.Sprintf("too many live pages are open from your address (%d); close some and reload", sc.perIP)}
	}
	if sc.total >= sc.max {
		return nil, &echo.HTTPError{Code: http.StatusServiceUnavailable, Message: "the server has as many live pages open as it can hold; try again in a minute"}
	}
	sc.total++
	sc.byAddr[addr]++
	var once sync.Once
	return func() {
		once.Do(func() {
			sc.mu.Lock()
			defer sc.mu.Unlock()
			sc.total--
			if sc.byAddr[addr]--; sc.byAddr[addr] <= 0 {
				delete(sc.byAddr, addr)
			}
		})
	}, nil
}

// limitStreams wraps an event stream route.
func (s *Server) limitStreams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		release, err := s.streams.acquire(c.RealIP())
		if err != nil {
			return err
		}
		defer release()
		return next(c)
	}
}

// followStream is every event stream's loop: each value from ch goes to
// send, a comment every 15 s keeps proxies from closing a quiet stream, and
// the loop ends when the client leaves, the channel closes, or send (or
// the keep-alive) cannot write.
func followStream[T any](ctx context.Context, w *echo.Response, ch <-chan T, send func(T) bool) {
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case v, open := <-ch:
			if !open || !send(v) {
				return
			}
		case <-heartbeat.C:
			if !keepAlive(w) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// startSSE writes the headers of an event stream. The server's read and
// write timeouts, which end slow or stuck requests, do not apply to it: a
// stream is meant to stay open, and ends when the client leaves.
func startSSE(c echo.Context) *echo.Response {
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

// allowLongWrite gives a download more time than an ordinary response.
func allowLongWrite(c echo.Context) { doorkit.LongWrite(c) }

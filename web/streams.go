package web

import (
	"fmt"
	"net/http"
	"sync"

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

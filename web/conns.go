package web

import (
	"net"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"time"
)

// ConnGuard keeps idle connections from taking the file descriptors that
// requests need: a client that opens thousands of keep-alive connections
// and leaves them idle (or a flood answered 429 that never hangs up) would
// otherwise hold them for the server's IdleTimeout, until accept fails and
// /healthz with it. Past max open connections the idle ones are closed,
// the longest idle first, down to three quarters of max; connections
// serving a request are never touched. Set http.Server.ConnState to its
// ConnState.
type ConnGuard struct {
	mu   sync.Mutex
	open int
	idle map[net.Conn]time.Time
	max  int
}

// NewConnGuard guards at most max open connections (0: what the process's
// file limit leaves after room for the database, upstreams and files).
func NewConnGuard(max int) *ConnGuard {
	if max <= 0 {
		max = connLimit()
	}
	return &ConnGuard{idle: map[net.Conn]time.Time{}, max: max}
}

func connLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < 2048 {
		return 768
	}
	return int(rl.Cur) - 1024
}

// Open is how many connections are open now.
func (g *ConnGuard) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// ConnState follows each connection (http.Server.ConnState).
func (g *ConnGuard) ConnState(c net.Conn, s http.ConnState) {
	var shed []net.Conn
	g.mu.Lock()
	switch s {
	case http.StateNew:
		g.open++
		if g.open > g.max {
			shed = g.idlest(g.open - g.max*3/4)
		}
	case http.StateIdle:
		g.idle[c] = time.Now()
	case http.StateActive:
		delete(g.idle, c)
	case http.StateHijacked, http.StateClosed:
		delete(g.idle, c)
		g.open--
	}
	g.mu.Unlock()
	for _, c := range shed {
		_ = c.Close() // the server then reports it closed
	}
}

// idlest takes up to n idle connections, longest idle first (g.mu held).
func (g *ConnGuard) idlest(n int) []net.Conn {
	conns := make([]net.Conn, 0, len(g.idle))
	for c := range g.idle {
		conns = append(conns, c)
	}
	sort.Slice(conns, func(i, j int) bool { return g.idle[conns[i]].Before(g.idle[conns[j]]) })
	if len(conns) > n {
		conns = conns[:n]
	}
	for _, c := range conns {
		delete(g.idle, c)
	}
	return conns
}

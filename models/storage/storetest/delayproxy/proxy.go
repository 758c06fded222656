// Package delayproxy is a TCP proxy that delays every byte by a fixed time
// each way, as a network between machines would, and counts the round
// trips its clients make: the benchmarks put it between Countersign and
// PostgreSQL, and the store's tests count round trips through it. It
// models latency, not bandwidth: what is read is delivered in order, each
// chunk once its delay has passed.
package delayproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections made to Addr to its target.
type Proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	// turns counts the times a client spoke after hearing from the server
	// (or first): one per round trip a client waited for.
	turns atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// Start listens on a local port and forwards to target with delay each way.
func Start(target string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, delay: delay}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where clients connect (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Turns is how many round trips the clients have made so far.
func (p *Proxy) Turns() int64 { return p.turns.Load() }

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		// spoke is 1 while the client has the floor: its next chunk after
		// an answer starts a round trip.
		var spoke atomic.Bool
		p.wg.Add(2)
		go p.pipe(c, s, func() {
			if !spoke.Swap(true) {
				p.turns.Add(1)
			}
		})
		go p.pipe(s, c, func() { spoke.Store(false) })
	}
}

// chunk is what was read, and when it may be written.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies from to to, each chunk delivered delay after it was read.
func (p *Proxy) pipe(from, to net.Conn, heard func()) {
	defer p.wg.Done()
	if p.delay == 0 {
		p.copy(from, to, heard)
		return
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := to.Write(ch.b); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			heard()
			q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay)}
		}
		if err != nil {
			close(q)
			<-done
			if tc, ok := to.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			if err != io.EOF {
				to.Close()
			}
			return
		}
	}
}

// copy is pipe without a delay: each chunk written as soon as it is read.
func (p *Proxy) copy(from, to net.Conn, heard func()) {
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			heard()
			if _, werr := to.Write(buf[:n]); werr != nil {
				from.Close()
				return
			}
		}
		if err != nil {
			if tc, ok := to.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			if err != io.EOF {
				to.Close()
			}
			return
		}
	}
}

package web_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/countersign/countersign/web"
)

// A client that leaves many keep-alive connections idle does not hold the
// server's descriptors: past the guard's limit the idle ones are closed,
// and a new request is still served.
func TestIdleConnectionsAreShedUnderPressure(t *testing.T) {
	guard := web.NewConnGuard(10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = guard.ConnState
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	var conns []net.Conn
	for range 40 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		conns = append(conns, c) // left open, idle
	}
	deadline := time.Now().Add(5 * time.Second)
	for guard.Open() > 10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, the guard allows 10", guard.Open())
		}
		time.Sleep(10 * time.Millisecond)
	}
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed < 30 {
		t.Fatalf("%d of 40 idle connections were closed by the server", closed)
	}
	res, err := http.Get(srv.URL)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("a new request after the shedding: %v %v", res, err)
	}
	res.Body.Close()
}

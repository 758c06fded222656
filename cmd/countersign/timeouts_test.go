package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// A client that stops sending its body is cut off by the read timeout; an
// event stream outlives both the read and the write timeouts and still
// delivers what happens later.
func TestServerTimeoutsSpareEventStreams(t *testing.T) {
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true,
		ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second}, io.Discard)
	base := "http://" + app.Addr()

	// A body that never arrives.
	conn, err := net.Dial("tcp", app.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"message\":")
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	rest, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept waiting for a body that never came")
	}
	_ = rest // whatever it answered, the connection was closed

	res, err := http.Post(base+"/api/v1/runs", "application/json", strings.NewReader(`{"message":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Run      struct{ ID string }
		RunToken string `json:"run_token"`
	}
	_ = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	req, _ := http.NewRequest("GET", base+"/api/v1/runs/"+created.Run.ID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+created.RunToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("stream: %v", err)
	}
	defer stream.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// Time itself is what this test is about: the stream must outlive the
	// server's read and write timeouts.
	time.Sleep(2500 * time.Millisecond)
	req, _ = http.NewRequest("POST", base+"/api/v1/runs/"+created.Run.ID+"/messages", strings.NewReader(`{"text":"where is my order A1002?"}`))
	req.Header.Set("Authorization", "Bearer "+created.RunToken)
	req.Header.Set("Content-Type", "application/json")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, open := <-lines:
			if !open {
				t.Fatal("the event stream was closed by the server's timeouts")
			}
			if strings.Contains(l, "where is my order A1002?") {
				return
			}
		case <-deadline:
			t.Fatal("the later message never reached the stream")
		}
	}
}

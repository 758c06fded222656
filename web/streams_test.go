package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// One address cannot hold every event stream, and the server holds no more
// than its cap; a closed stream frees its place.
func TestEventStreamsAreCappedInAllAndPerAddress(t *testing.T) {
	a := newAppWith(t, func(c *web.Config) { c.TrustProxy, c.MaxStreamsPerAddress, c.MaxStreams = true, 3, 5 })
	a.staff(models.Approver, "ann@x.test", "Ann")
	b := a.signIn("ann@x.test")
	open := func(ip string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", a.srv.URL+"/queue/events", nil)
		req.Header.Set("X-Forwarded-For", ip)
		res, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); res.Body.Close() })
		return res, cancel
	}
	var first context.CancelFunc
	for i := 0; i < 3; i++ {
		res, cancel := open("198.51.100.1")
		if res.StatusCode != 200 {
			t.Fatalf("stream %d: %d", i+1, res.StatusCode)
		}
		if i == 0 {
			first = cancel
		}
	}
	if res, _ := open("198.51.100.1"); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a fourth stream from one address: %d, want 429", res.StatusCode)
	}
	for i := 0; i < 2; i++ {
		if res, _ := open(fmt.Sprintf("198.51.100.%d", 10+i)); res.StatusCode != 200 {
			t.Fatalf("another address: %d", res.StatusCode)
		}
	}
	if res, _ := open("198.51.100.20"); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a sixth stream in all: %d, want 503", res.StatusCode)
	}
	first()
	for i := 0; ; i++ {
		res, _ := open("198.51.100.1")
		if res.StatusCode == 200 {
			break
		}
		if i == 100 {
			t.Fatal("a closed stream never freed its place")
		}
		res.Body.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

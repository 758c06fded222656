package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/web/chat"
)

var demoToken = regexp.MustCompile(`data-customer-token="([^"]+)"`)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// /demo must never sign as the shop: with the shop's secret set it is off
// unless asked for, and even then its tokens are its own and name only the
// demo customers.
func TestDemoPageNeverSignsAsTheShop(t *testing.T) {
	const shopSecret = "the-shops-own-secret-the-shops-own"
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true, CustomerSecret: shopSecret}, io.Discard)
	if code, _ := get(t, "http://"+app.Addr()+"/demo?as=cus_alice"); code != http.StatusNotFound {
		t.Fatalf("/demo with the shop's secret set: %d, want 404", code)
	}

	app = serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true, CustomerSecret: shopSecret, DemoPage: true}, io.Discard)
	code, page := get(t, "http://"+app.Addr()+"/demo?as=cus_alice")
	m := demoToken.FindStringSubmatch(page)
	if code != 200 || m == nil {
		t.Fatalf("/demo with --demo-page: %d, token %v", code, m)
	}
	if _, err := chat.NewCustomerVerifier(shopSecret).Verify(m[1]); err == nil {
		t.Fatal("the demo page signed a token with the shop's secret")
	}
	// The server itself accepts it, for Alice.
	res, err := http.Post("http://"+app.Addr()+"/api/v1/runs", "application/json",
		strings.NewReader(`{"message":"hello","customer_token":"`+m[1]+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"customer_id":"cus_alice"`) {
		t.Fatalf("the demo token on the API: %d %s", res.StatusCode, body)
	}
	// And a token the shop signs still works beside it.
	tok, _ := chat.SignCustomerToken(shopSecret, "cus_real", "Real Customer", time.Hour)
	res, err = http.Post("http://"+app.Addr()+"/api/v1/runs", "application/json",
		strings.NewReader(`{"message":"hello","customer_token":"`+tok+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("the shop's token beside the demo page: %d", res.StatusCode)
	}

	app = serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), Demo: true}, io.Discard)
	if code, page := get(t, "http://"+app.Addr()+"/demo?as=cus_bob"); code != 200 || !demoToken.MatchString(page) {
		t.Fatalf("/demo with --demo alone: %d", code)
	}
}

// Behind a load balancer the next request may reach another instance: a
// token /demo signed on one, and the chat grant it was given, are accepted
// by another on the same database.
func TestDemoTokensHoldOnEveryInstance(t *testing.T) {
	dsn := storetest.DSN(t)
	one := serveApp(t, config{Addr: "127.0.0.1:0", DB: dsn, Demo: true}, io.Discard)
	other := serveApp(t, config{Addr: "127.0.0.1:0", DB: dsn, Demo: true}, io.Discard)
	_, page := get(t, "http://"+one.Addr()+"/demo?as=cus_alice")
	m := demoToken.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("/demo gave no token")
	}
	res, err := http.Post("http://"+other.Addr()+"/api/v1/runs", "application/json",
		strings.NewReader(`{"message":"hello","customer_token":"`+m[1]+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"customer_id":"cus_alice"`) {
		t.Fatalf("a token /demo signed on one instance, on another: %d %s", res.StatusCode, body)
	}
}

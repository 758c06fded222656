// Command widget opens many customer chat streams (the widget's /chat/events)
// against one in-process server and measures the server's memory and the
// time from a staff decision to the customer's stream carrying the outcome.
//
//	go run ./bench/widget -streams 1000 -decisions 50
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/bench/internal/measure"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/chat"
	"github.com/countersign/countersign/web/webtest"
)

func main() {
	streams := flag.Int("streams", 1000, "customer chat streams to hold open")
	decisions := flag.Int("decisions", 50, "staff decisions to time")
	flag.Parse()
	if err := run(*streams, *decisions); err != nil {
		fmt.Fprintln(os.Stderr, "widget:", err)
		os.Exit(1)
	}
}

type customer struct {
	client *http.Client
	seen   chan string // every "log" event's data
	events string      // the stream to follow, with its grant
	addr   string      // where the customer comes from
}

func run(nStreams, nDecisions int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cs-widget-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := openShop(ctx, filepath.Join(dir, "bench.db"), nDecisions)
	if err != nil {
		return err
	}
	defer store.Close()
	reg, _ := tools.NewRegistry(shop.Tools(store)...)
	policy, _ := policy.LoadPolicy(shop.PolicyYAML, "default", reg)
	log := slog.New(slog.DiscardHandler)
	const secret = "widget-bench-secret-widget-bench-secret"
	app, site := webtest.New(core.Config{Store: store, Tools: reg, Policy: policy, Model: offline.Model{}, Business: shop.Facts{Store: store}, Log: log},
		web.Config{Customers: chat.NewCustomerVerifier(secret), TrustProxy: true})
	defer app.Close()
	srv := httptest.NewServer(site.Handler())
	defer srv.Close()
	bob, _ := chat.SignCustomerToken(secret, "cus_bob", "Bob", time.Hour)
	transport := &http.Transport{MaxIdleConnsPerHost: nStreams + 10}

	customers, err := startCustomers(srv.URL, bob, transport, nStreams, nDecisions)
	if err != nil {
		return err
	}
	runtime.GC()
	before := measure.RSSMB()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	openStreams(streamCtx, srv.URL, customers)
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	after := measure.RSSMB()
	fmt.Printf("%d customer streams open: process RSS %.0f MB -> %.0f MB (+%.1f kB per stream, client and server in one process), Go heap in use +%.1f MB\n",
		nStreams, before, after, (after-before)*1024/float64(nStreams), float64(int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/1e6)

	lats, err := decide(ctx, store, app.Gate, customers, nDecisions)
	if err != nil {
		return err
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	fmt.Printf("staff decision to the customer's stream carrying the outcome (%d decisions, %d streams open): p50 %.1f ms, p90 %.1f ms, max %.1f ms\n",
		len(lats), nStreams, measure.MS(lats[len(lats)/2]), measure.MS(lats[len(lats)*9/10]), measure.MS(lats[len(lats)-1]))
	return nil
}

// openShop is the demo shop with one order per decision, so that every
// approved refund succeeds.
func openShop(ctx context.Context, path string, nDecisions int) (*storage.Store, error) {
	store, err := storage.Open(path, storage.Options{Own: shop.Schema})
	if err != nil {
		return nil, err
	}
	if _, err := shop.On(store).Seed(ctx); err != nil {
		store.Close()
		return nil, err
	}
	var orders []shop.Order
	for i := 0; i < nDecisions; i++ {
		orders = append(orders, shop.Order{ID: fmt.Sprintf("W%06d", i), CustomerID: "cus_bob", Status: shop.OrderDelivered, TotalCents: 100000, Items: "Bench"})
	}
	if err := shop.On(store).AddOrders(ctx, orders); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

var sseConnect = regexp.MustCompile(`sse-connect="([^"]+)"`)

// startCustomers opens a chat per customer: the first nDecisions ask for a
// refund that needs approval, the others just chat.
func startCustomers(base, token string, transport *http.Transport, nStreams, nDecisions int) ([]*customer, error) {
	customers := make([]*customer, nStreams)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	errs := make(chan error, nStreams)
	for i := range customers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			jar, _ := cookiejar.New(nil)
			c := &customer{client: &http.Client{Jar: jar, Transport: transport}, seen: make(chan string, 16)}
			msg := "hello"
			if i < nDecisions {
				msg = fmt.Sprintf("refund $60 on order W%06d", i)
			}
			req, _ := http.NewRequest("POST", base+"/chat/messages", strings.NewReader(url.Values{"text": {msg}, "customer_token": {token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("HX-Request", "true")
			// Each customer comes from its own address, as on the internet;
			// the per-address rate limit is not what this measures.
			c.addr = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			req.Header.Set("X-Forwarded-For", c.addr)
			res, err := c.client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			page, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				errs <- fmt.Errorf("chat message: %d", res.StatusCode)
				return
			}
			// The page names the stream to follow, with the grant that opens it.
			m := sseConnect.FindSubmatch(page)
			if m == nil {
				errs <- fmt.Errorf("the chat's answer names no event stream")
				return
			}
			c.events = html.UnescapeString(string(m[1]))
			customers[i] = c
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	return customers, nil
}

// openStreams opens every customer's event stream and returns once each has
// had its first event; the streams pass what they carry on to c.seen until
// ctx ends.
func openStreams(ctx context.Context, base string, customers []*customer) {
	ready := make(chan struct{}, len(customers))
	for _, c := range customers {
		go follow(ctx, base, c, ready)
	}
	for range customers {
		<-ready
	}
}

func follow(ctx context.Context, base string, c *customer, ready chan<- struct{}) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+c.events, nil)
	req.Header.Set("X-Forwarded-For", c.addr)
	res, err := c.client.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		if err == nil {
			fmt.Fprintf(os.Stderr, "a customer's stream was refused: %s\n", res.Status)
			res.Body.Close()
		}
		ready <- struct{}{}
		return
	}
	defer res.Body.Close()
	br := bufio.NewReaderSize(res.Body, 4096)
	var data strings.Builder
	first := true
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		switch {
		case strings.HasPrefix(line, "data: "):
			data.WriteString(line[6:])
		case line == "\n":
			if first {
				first = false
				ready <- struct{}{}
			} else {
				select {
				case c.seen <- data.String():
				default:
				}
			}
			data.Reset()
		}
	}
}

// decide approves every waiting refund, one at a time, and measures how
// long each takes to reach its customer's stream.
func decide(ctx context.Context, store *storage.Store, g *gate.Gate, customers []*customer, nDecisions int) ([]time.Duration, error) {
	staff, err := accounts.New(store).AddStaff(ctx, "ann@x.test", "Ann", models.Approver, "benchmark password", models.Actor{})
	if err != nil {
		return nil, err
	}
	pending, err := store.PendingActions(ctx, models.ActionFilter{Limit: nDecisions})
	if err != nil || len(pending) != nDecisions {
		return nil, fmt.Errorf("%d pending actions, want %d: %v", len(pending), nDecisions, err)
	}
	var lats []time.Duration
	for i, p := range pending {
		// The order number says whose refund it is: W000007 is customer 7's.
		var who int
		if _, err := fmt.Sscanf(p.Args[strings.Index(p.Args, `"W`)+2:], "%06d", &who); err != nil {
			return nil, fmt.Errorf("args %s: %v", p.Args, err)
		}
		c := customers[who]
		for len(c.seen) > 0 {
			<-c.seen
		}
		start := time.Now()
		if _, err := g.Approve(ctx, p.ID, staff.Actor(), gate.ApproveRequest{}); err != nil {
			return nil, err
		}
		if err := c.await("Done: I refunded", 10*time.Second); err != nil {
			return nil, fmt.Errorf("decision %d: %w", i, err)
		}
		lats = append(lats, time.Since(start))
	}
	return lats, nil
}

// await waits for the customer's stream to carry text.
func (c *customer) await(text string, within time.Duration) error {
	deadline := time.After(within)
	for {
		select {
		case d := <-c.seen:
			if strings.Contains(d, text) {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("the customer's stream never carried the outcome")
		}
	}
}

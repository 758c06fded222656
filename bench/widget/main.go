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
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm/offline"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/bench/internal/measure"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/shop"
	"github.com/countersign/countersign/web"
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
}

func run(nStreams, nDecisions int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cs-widget-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := models.Open(filepath.Join(dir, "bench.db"), models.Options{Demo: true})
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.SeedDemoShop(ctx); err != nil {
		return err
	}
	// One order per decision, so that every approved refund succeeds.
	var orders []models.Order
	for i := 0; i < nDecisions; i++ {
		orders = append(orders, models.Order{ID: fmt.Sprintf("W%06d", i), CustomerID: "cus_bob", Status: models.OrderDelivered, TotalCents: 100000, Items: "Bench"})
	}
	if err := store.AddOrders(ctx, orders); err != nil {
		return err
	}
	reg, _ := tools.NewRegistry(shop.Tools(store)...)
	policy, _ := policy.LoadPolicy(shop.PolicyYAML, "default", reg)
	log := slog.New(slog.DiscardHandler)
	const secret = "widget-bench-secret-widget-bench-secret"
	app := webtest.New(core.Config{Store: store, Tools: reg, Policy: policy, Model: offline.Model{}, Business: shop.Facts{Store: store}, Log: log},
		web.Config{Customers: web.NewCustomerVerifier(secret), TrustProxy: true})
	defer app.Close()
	g := app.Core.Gate
	srv := httptest.NewServer(app.Server.Handler())
	defer srv.Close()
	bob, _ := web.SignCustomerToken(secret, "cus_bob", "Bob", time.Hour)
	transport := &http.Transport{MaxIdleConnsPerHost: nStreams + 10}

	// Customers: the first nDecisions ask for a refund that needs approval,
	// the others just chat; every one keeps its stream open.
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
			req, _ := http.NewRequest("POST", srv.URL+"/chat/messages", strings.NewReader(url.Values{"text": {msg}, "customer_token": {bob}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("HX-Request", "true")
			// Each customer comes from its own address, as on the internet;
			// the per-address rate limit is not what this measures.
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
			res, err := c.client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				errs <- fmt.Errorf("chat message: %d", res.StatusCode)
				return
			}
			customers[i] = c
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	runtime.GC()
	before := measure.RSSMB()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	ready := make(chan struct{}, nStreams)
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	for _, c := range customers {
		go func(c *customer) {
			req, _ := http.NewRequestWithContext(streamCtx, "GET", srv.URL+"/chat/events", nil)
			res, err := c.client.Do(req)
			if err != nil {
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
		}(c)
	}
	for range customers {
		<-ready
	}
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	after := measure.RSSMB()
	fmt.Printf("%d customer streams open: process RSS %.0f MB -> %.0f MB (+%.1f kB per stream, client and server in one process), Go heap in use +%.1f MB\n",
		nStreams, before, after, (after-before)*1024/float64(nStreams), float64(int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/1e6)

	staff, err := accounts.New(store).AddStaff(ctx, "ann@x.test", "Ann", models.Approver, "benchmark password", models.Actor{})
	if err != nil {
		return err
	}
	var lats []time.Duration
	pending, err := store.PendingActions(ctx, models.ActionFilter{Limit: nDecisions})
	if err != nil || len(pending) != nDecisions {
		return fmt.Errorf("%d pending actions, want %d: %v", len(pending), nDecisions, err)
	}
	for i := range pending {
		pend := pending[i : i+1]
		// The order number says whose refund it is: W000007 is customer 7's.
		var who int
		if _, err := fmt.Sscanf(pend[0].Args[strings.Index(pend[0].Args, `"W`)+2:], "%06d", &who); err != nil {
			return fmt.Errorf("args %s: %v", pend[0].Args, err)
		}
		c := customers[who]
		for len(c.seen) > 0 {
			<-c.seen
		}
		start := time.Now()
		if _, err := g.Approve(ctx, pend[0].ID, staff.Actor(), gate.ApproveRequest{}); err != nil {
			return err
		}
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case d := <-c.seen:
				if strings.Contains(d, "Done: I refunded") {
					lats = append(lats, time.Since(start))
					break wait
				}
			case <-deadline:
				return fmt.Errorf("decision %d: the customer's stream never carried the outcome", i)
			}
		}
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	fmt.Printf("staff decision to the customer's stream carrying the outcome (%d decisions, %d streams open): p50 %.1f ms, p90 %.1f ms, max %.1f ms\n",
		len(lats), nStreams, measure.MS(lats[len(lats)/2]), measure.MS(lats[len(lats)*9/10]), measure.MS(lats[len(lats)-1]))
	return nil
}

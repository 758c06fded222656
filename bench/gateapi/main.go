// Command gateapi measures what asking Countersign adds to a tool call: an
// allowed read through POST /api/v1/calls (agent key, normalize, decide,
// record, call the backend, record the result) against calling the same
// backend directly, alternated in one run, sequentially. BENCHMARKS.md.
//
//	go run ./bench/gateapi -n 3000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/bench/internal/measure"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/webtest"
)

func main() {
	n := flag.Int("n", 3000, "calls of each kind")
	flag.Parse()
	if err := run(*n); err != nil {
		log.Fatal(err)
	}
}

func run(n int) error {
	ctx := context.Background()
	backend := measure.OrderBackend()
	defer backend.Close()
	set, err := httptool.Load(measure.LookupOrderTools(backend.URL), "bench", httptool.Options{})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gateapi")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := storage.Open(filepath.Join(dir, "cs.db"), storage.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		return err
	}
	// One key sends every call: the per-agent rate limit is lifted.
	app, site := webtest.New(core.Config{Store: store, Tools: reg, Policy: pol, Log: slog.New(slog.DiscardHandler)},
		web.Config{AgentCallsPerSecond: 1_000_000, AgentCallBurst: 1_000_000})
	defer app.Close()
	srv := httptest.NewServer(site.Handler())
	defer srv.Close()
	key, _, err := app.Accounts.AddAgent(ctx, "bench", models.Actor{ID: "bench"})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func(req *http.Request) error {
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, res.Status)
		}
		return nil
	}
	direct := func(i int) error {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/orders/A%d", backend.URL, i), nil)
		return send(req)
	}
	gated := func(i int) error {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/calls",
			strings.NewReader(fmt.Sprintf(`{"tool":"lookup_order","args":{"order_id":"A%d"},"session":"s%d"}`, i, i%50)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		return send(req)
	}
	return compare(n, direct, gated)
}

// compare times n calls of each kind, alternated, after a warm-up of both.
func compare(n int, direct, gated func(int) error) error {
	for i := 0; i < 200; i++ { // warm up both paths
		if err := direct(i); err != nil {
			return err
		}
		if err := gated(i); err != nil {
			return err
		}
	}
	var dLat, gLat []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := direct(i); err != nil {
			return err
		}
		t1 := time.Now()
		if err := gated(i); err != nil {
			return err
		}
		dLat, gLat = append(dLat, t1.Sub(t0)), append(gLat, time.Since(t1))
	}
	p := measure.Percentile
	fmt.Printf("calls of each kind: %d (sequential, alternated)\n", n)
	fmt.Printf("direct to the backend:      p50 %.3f ms  p99 %.3f ms\n", measure.MS(p(dLat, .5)), measure.MS(p(dLat, .99)))
	fmt.Printf("through POST /api/v1/calls: p50 %.3f ms  p99 %.3f ms\n", measure.MS(p(gLat, .5)), measure.MS(p(gLat, .99)))
	fmt.Printf("added by Countersign:       p50 %.3f ms  p99 %.3f ms\n", measure.MS(p(gLat, .5)-p(dLat, .5)), measure.MS(p(gLat, .99)-p(dLat, .99)))
	return nil
}

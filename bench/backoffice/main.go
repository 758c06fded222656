// Command backoffice seeds a database with a large history (pending actions
// and decided calls) and measures the back office against it: the server
// time of /queue and /audit, export rows per second, the query plans, and
// live updates to many open queue streams.
//
//	go run -tags sqlite_fts5 ./bench/backoffice -calls 1000000 -pending 10000 -clients 1000
//	go run -tags sqlite_fts5 ./bench/backoffice -db postgres://…/empty_database   # the same on PostgreSQL,
//	                                                            # decisions made on a second instance
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
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/mattn/go-sqlite3"

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
	"github.com/countersign/countersign/web/webtest"
)

func main() {
	calls := flag.Int("calls", 1_000_000, "decided tool calls to seed")
	pending := flag.Int("pending", 10_000, "pending actions to seed")
	clients := flag.Int("clients", 1000, "queue streams to open")
	dir := flag.String("dir", "", "where to keep the database (default: a temporary directory)")
	db := flag.String("db", "", "an empty PostgreSQL database's URL to use instead of a SQLite file")
	flag.StringVar(&chromium, "chromium", "/usr/bin/chromium", "headless Chromium, to time an action page's first byte to its controls")
	flag.Parse()
	if err := run(*calls, *pending, *clients, *dir, *db); err != nil {
		fmt.Fprintln(os.Stderr, "backoffice:", err)
		os.Exit(1)
	}
}

func run(nCalls, nPending, nClients int, dir, dsn string) error {
	ctx := context.Background()
	if dir == "" && dsn == "" {
		d, err := os.MkdirTemp("", "cs-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	path := dsn
	if path == "" {
		path = filepath.Join(dir, "bench.db")
	}
	store, err := seeded(ctx, path, nCalls, nPending)
	if err != nil {
		return err
	}
	defer store.Close()
	reg, _ := tools.NewRegistry(shop.Tools(store)...)
	policy, err := policy.LoadPolicy(shop.PolicyYAML, "default", reg)
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	// Every stream comes from this one address: lift the per-address cap.
	streams := web.Config{MaxStreams: nClients + 100, MaxStreamsPerAddress: nClients + 100}
	app, site := webtest.New(core.Config{Store: store, Tools: reg, Policy: policy, Model: offline.Model{}, Business: shop.Facts{Store: store}, Log: log}, streams)
	defer app.Close()
	g, accounts := app.Gate, app.Accounts
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	if _, err := app.Start(hubCtx); err != nil {
		return err
	}
	srv := httptest.NewServer(site.Handler())
	defer srv.Close()

	const pw = "benchmark password 1"
	admin, err := accounts.AddStaff(ctx, "bench@x.test", "Bench Admin", models.Admin, pw, models.Actor{})
	if err != nil {
		return err
	}
	client, err := signIn(srv.URL, "bench@x.test", pw)
	if err != nil {
		return err
	}

	if err := report(client, srv.URL, path, nCalls); err != nil {
		return err
	}
	fmt.Println("\nthe action page in Chromium (1440×900, 20 views):")
	oldest, err := store.PendingActions(ctx, models.ActionFilter{Limit: 1})
	if err != nil || len(oldest) == 0 {
		return fmt.Errorf("no pending action to open: %v", err)
	}
	if err := decisionReady(chromium, srv.URL, "bench@x.test", pw, oldest[0].ID, 20); err != nil {
		return err
	}

	if storage.IsPostgres(path) {
		// The decisions are made on a second instance on the same database:
		// the streams open on the first hear of them through PostgreSQL.
		other, err := storage.Open(path, storage.Options{})
		if err != nil {
			return err
		}
		defer other.Close()
		app2, _ := webtest.New(core.Config{Store: other, Tools: reg, Policy: policy, Model: offline.Model{}, Business: shop.Facts{Store: other}, Log: log}, web.Config{})
		defer app2.Close()
		if _, err := app2.Start(hubCtx); err != nil {
			return err
		}
		fmt.Printf("\nlive updates: %d open queue streams on one instance, decisions made on another\n", nClients)
		return liveUpdates(ctx, srv.URL, client, app2.Gate, other, admin, nClients)
	}
	fmt.Printf("\nlive updates: %d open queue streams\n", nClients)
	return liveUpdates(ctx, srv.URL, client, g, store, admin, nClients)
}

// seeded is the database at path with nCalls decided calls and nPending
// actions waiting, the demo shop's own rows, and the audit search's index
// up to date.
func seeded(ctx context.Context, path string, nCalls, nPending int) (*storage.Store, error) {
	t0 := time.Now()
	if err := seed(path, nCalls, nPending); err != nil {
		return nil, err
	}
	fmt.Printf("seeded %d decided calls and %d pending actions in %s (%.0f MB)\n", nCalls, nPending, time.Since(t0).Round(time.Second), dbSize(path)/1e6)
	store, err := storage.Open(path, storage.Options{Own: shop.Schema})
	if err != nil {
		return nil, err
	}
	if _, err := shop.On(store).Seed(ctx); err != nil {
		store.Close()
		return nil, err
	}
	// The seed wrote past the store (no event names its calls), so the
	// derived data (the audit search's index, the counts by hour) is made
	// from the calls before measuring.
	t1 := time.Now()
	if err := store.Rederive(ctx); err != nil {
		store.Close()
		return nil, err
	}
	fmt.Printf("made the derived data (search index, counts by hour) in %s\n", time.Since(t1).Round(time.Millisecond))
	return store, nil
}

// chromium is the browser the action page is timed in (-chromium).
var chromium string

var tools5 = []string{"get_order_status", "list_orders", "update_shipping_address", "cancel_order", "issue_refund"}

func signIn(base, email, pw string) (*http.Client, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(base+"/login", url.Values{"email": {email}, "password": {pw}})
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("sign in: %d", res.StatusCode)
	}
	return c, nil
}

func timeGet(c *http.Client, u string, n int) ([]time.Duration, error) {
	var out []time.Duration
	for i := 0; i < n+2; i++ {
		start := time.Now()
		res, err := c.Get(u)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %d", u, res.StatusCode)
		}
		if i >= 2 { // two warm-up requests
			out = append(out, time.Since(start))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func liveUpdates(ctx context.Context, base string, signedIn *http.Client, g *gate.Gate, store *storage.Store, admin *models.Staff, n int) error {
	runtime.GC()
	before := measure.RSSMB()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	transport := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
	jar := signedIn.Jar
	l := &listeners{n: int64(n)}
	l.ready.Add(n)
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	for i := 0; i < n; i++ {
		go l.follow(streamCtx, &http.Client{Jar: jar, Transport: transport}, base+"/queue/events")
	}
	l.ready.Wait()
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	after := measure.RSSMB()
	fmt.Printf("  memory with %d streams open: RSS %.0f MB -> %.0f MB (+%.1f kB per stream), Go heap in use +%.1f MB\n",
		n, before, after, (after-before)*1024/float64(n), float64(int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/1e6)

	var lats []time.Duration
	for round := 0; round < 5; round++ {
		pend, err := store.PendingActions(ctx, models.ActionFilter{Limit: 1})
		if err != nil || len(pend) == 0 {
			return fmt.Errorf("no pending action: %v", err)
		}
		l.received.Store(0)
		l.got.Add(1)
		l.armed.Store(true)
		start := time.Now()
		if err := g.Reject(ctx, pend[0].ID, admin.Actor(), "benchmark"); err != nil {
			return err
		}
		done := make(chan struct{})
		go func() { l.got.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("only %d of %d streams got the update", l.received.Load(), n)
		}
		l.armed.Store(false)
		lats = append(lats, time.Duration(l.lastAt.Load()-start.UnixNano()))
		time.Sleep(200 * time.Millisecond) // let stragglers of this round drain
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	fmt.Printf("  decision to all %d streams having the new queue: median %.1f ms, worst %.1f ms (5 decisions)\n", n, measure.MS(lats[len(lats)/2]), measure.MS(lats[len(lats)-1]))
	return nil
}

// report prints the query plans, the pages' times and the exports' rates.
func report(client *http.Client, base, path string, nCalls int) error {
	fmt.Println("\nquery plans:")
	if err := plans(path); err != nil {
		return err
	}

	fmt.Println("\npage times (client-measured over loopback, 20 requests each):")
	deepAt := min(900_000, nCalls*9/10)
	deep, err := deepCursor(path, deepAt)
	if err != nil {
		return err
	}
	for _, p := range []struct{ name, path string }{
		{"/queue", "/queue"},
		{"/audit first page", "/audit"},
		{fmt.Sprintf("/audit deep page (row %d)", deepAt), "/audit?after=" + url.QueryEscape(deep)},
		{"/audit filtered (tool=cancel_order)", "/audit?tool=cancel_order"},
		{"/audit filtered (status=rejected, deep)", "/audit?status=rejected&after=" + url.QueryEscape(deep)},
		{"/audit filtered by staff (Ben)", "/audit?staff=Ben"},
		{"/audit text in arguments, a rare match (q=A123456)", "/audit?q=A123456"},
	} {
		d, err := timeGet(client, base+p.path, 20)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Printf("  %-42s p50 %6.1f ms   p90 %6.1f ms\n", p.name, measure.MS(d[len(d)/2]), measure.MS(d[len(d)*9/10]))
	}

	fmt.Println("\nexport:")
	for _, p := range []string{"/audit/export.csv?tool=issue_refund", "/audit/export.jsonl?tool=issue_refund"} {
		start := time.Now()
		res, err := client.Get(base + p)
		if err != nil {
			return err
		}
		rows := 0
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			rows++
		}
		res.Body.Close()
		el := time.Since(start)
		fmt.Printf("  %-40s %d rows in %s: %.0f rows/s\n", p, rows, el.Round(time.Millisecond), float64(rows)/el.Seconds())
	}
	return nil
}

// listeners are the open queue streams: each counts the events it gets
// while armed, and the last to get one says when.
type listeners struct {
	n          int64
	ready, got sync.WaitGroup
	received   atomic.Int64
	armed      atomic.Bool
	lastAt     atomic.Int64 // unix nanoseconds
}

func (l *listeners) follow(ctx context.Context, c *http.Client, url string) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := c.Do(req)
	if err != nil {
		l.ready.Done()
		return
	}
	defer res.Body.Close()
	br := bufio.NewReaderSize(res.Body, 4<<10)
	first := true
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		if line != "\n" { // not yet the end of one event
			continue
		}
		if first {
			first = false
			l.ready.Done()
			continue
		}
		if l.armed.Load() {
			l.lastAt.Store(time.Now().UnixNano())
			if l.received.Add(1) == l.n {
				l.got.Done()
			}
		}
	}
}

package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/policy"
	bm "github.com/countersign/countersign/bench/internal/measure"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest/delayproxy"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/webtest"
)

// result is one measurement: calls a second over the fleet, latency, and
// round trips to PostgreSQL per call (every connection of every instance).
type result struct {
	rate, p50, p99, trips float64
	busy                  float64 // the machine's cores, busy (0 to 1)
}

// instance is one Countersign serving over httptest, with its agents' keys.
type instance struct {
	url   string
	keys  []string
	close func()
}

// measure boots n instances on a new database behind a proxy delaying
// each way, lets agents per instance call without pause, and measures the
// last four fifths of dur.
func measure(adminDSN string, delay time.Duration, n, agents int, dur time.Duration) (result, error) {
	dsn, drop, err := newDatabase(adminDSN)
	if err != nil {
		return result{}, err
	}
	defer drop()
	u, _ := url.Parse(dsn)
	proxy, err := delayproxy.Start(u.Host, delay)
	if err != nil {
		return result{}, err
	}
	defer proxy.Close()
	u.Host = proxy.Addr()
	backend := bm.OrderBackend()
	defer backend.Close()
	var fleet []*instance
	defer func() {
		for _, in := range fleet {
			in.close()
		}
	}()
	for range n {
		in, err := boot(u.String(), backend.URL, agents)
		if err != nil {
			return result{}, err
		}
		fleet = append(fleet, in)
	}
	return load(fleet, proxy, dur)
}

// load runs every agent of the fleet until dur is over.
func load(fleet []*instance, proxy *delayproxy.Proxy, dur time.Duration) (result, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	warm := time.Now().Add(dur / 5)
	end := warm.Add(dur - dur/5)
	var turns0 atomic.Int64
	var cpu0 atomic.Pointer[bm.CPU]
	go func() {
		time.Sleep(time.Until(warm))
		turns0.Store(proxy.Turns())
		c := bm.ReadCPU()
		cpu0.Store(&c)
	}()
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Value
	var wg sync.WaitGroup
	for _, in := range fleet {
		for a, key := range in.keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for i := 0; time.Now().Before(end); i++ {
					t0 := time.Now()
					if err := call(client, in.url, key, fmt.Sprintf("A%d", i), fmt.Sprintf("s%d", a)); err != nil {
						failed.Store(err)
						return
					}
					if t0.After(warm) {
						mine = append(mine, time.Since(t0))
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	var busy float64
	if c0 := cpu0.Load(); c0 != nil {
		busy = bm.ReadCPU().BusySince(*c0)
	}
	if err, _ := failed.Load().(error); err != nil {
		return result{}, err
	}
	if len(lat) == 0 {
		return result{}, fmt.Errorf("no call finished in the measured time")
	}
	trips := float64(proxy.Turns()-turns0.Load()) / float64(len(lat))
	return result{rate: float64(len(lat)) / end.Sub(warm).Seconds(), p50: bm.MS(bm.Percentile(lat, .5)),
		p99: bm.MS(bm.Percentile(lat, .99)), trips: trips, busy: busy}, nil
}

func call(client *http.Client, base, key, order, session string) error {
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/calls",
		strings.NewReader(`{"tool":"lookup_order","args":{"order_id":"`+order+`"},"session":"`+session+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("POST /api/v1/calls: %s", res.Status)
	}
	return nil
}

// boot starts one instance on dsn, as `countersign serve` would, with an
// HTTP tool over backend and agents keys of its own.
func boot(dsn, backend string, agents int) (*instance, error) {
	set, err := httptool.Load(bm.LookupOrderTools(backend), "bench", httptool.Options{})
	if err != nil {
		return nil, err
	}
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		return nil, err
	}
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		store.Close()
		return nil, err
	}
	ctx := context.Background()
	co, site := webtest.New(core.Config{Store: store, Tools: reg, Policy: pol, Log: slog.New(slog.DiscardHandler)},
		web.Config{AgentCallsPerSecond: 1_000_000, AgentCallBurst: 1_000_000})
	if _, err := co.Start(ctx); err != nil {
		store.Close()
		return nil, err
	}
	srv := httptest.NewServer(site.Handler())
	in := &instance{url: srv.URL, close: func() { srv.Close(); co.Close(); store.Close() }}
	for i := range agents {
		key, _, err := co.Accounts.AddAgent(ctx, fmt.Sprintf("bench-%d-%d", srv.Listener.Addr().(*net.TCPAddr).Port, i), models.Actor{ID: "bench"})
		if err != nil {
			in.close()
			return nil, err
		}
		in.keys = append(in.keys, key)
	}
	return in, nil
}

// newDatabase creates a database of its own for one measurement on the
// server adminDSN names; drop removes it.
func newDatabase(adminDSN string) (dsn string, drop func(), err error) {
	admin, err := sql.Open("pgx", adminDSN)
	if err != nil {
		return "", nil, err
	}
	var b [6]byte
	rand.Read(b[:])
	name := "cs_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create a database for the benchmark: %w", err)
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		admin.Close()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		admin.Close()
	}, nil
}

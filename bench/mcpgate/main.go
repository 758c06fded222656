// Command mcpgate measures what the MCP gateway adds: an allowed read
// (read_text_file of the official filesystem server, from .ci/mcp) straight
// to the upstream over stdio, against the same read through Countersign's
// /mcp (agent key, gate, record, forward once), same Go SDK client code,
// alternated, sequential. BENCHMARKS.md.
//
//	make mcp-servers && go run ./bench/mcpgate -n 2000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/bench/internal/measure"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
)

type bearer string

func (k bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

func main() {
	n := flag.Int("n", 2000, "reads of each kind")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the run here")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*n); err != nil {
		pprof.StopCPUProfile()
		log.Fatal(err)
	}
}

func run(n int) error {
	ctx := context.Background()
	script, _ := filepath.Abs(".ci/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	if _, err := os.Stat(script); err != nil {
		return fmt.Errorf("run make mcp-servers first: %w", err)
	}
	dir, err := os.MkdirTemp("", "mcpgate")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(file, []byte("a line to read"), 0o600); err != nil {
		return err
	}
	// Straight to the upstream.
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command("node", script, dir)}, nil)
	if err != nil {
		return err
	}
	defer direct.Close()
	// Through Countersign.
	set, err := httptool.Load([]byte(fmt.Sprintf("mcp_servers:\n  - name: fs\n    command: node\n    args: [%q, %q]\n", script, dir)), "bench", httptool.Options{})
	if err != nil {
		return err
	}
	defer set.Close()
	store, err := models.Open(filepath.Join(dir, "cs.db"), models.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	// One key sends every call: the per-agent rate limit is lifted.
	app := web.NewApp(web.AppConfig{Store: store, Tools: reg, Policy: pol, Log: slog.New(slog.DiscardHandler),
		Web: web.Config{AgentCallsPerSecond: 1_000_000, AgentCallBurst: 1_000_000}})
	defer app.Close()
	srv := httptest.NewServer(app.Server.Handler())
	defer srv.Close()
	key, _, err := app.Accounts.AddAgent(ctx, "bench", models.Actor{ID: "bench"})
	if err != nil {
		return err
	}
	gated, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer(key)}}, nil)
	if err != nil {
		return err
	}
	defer gated.Close()
	call := func(cs *mcp.ClientSession, name string) error {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": file}})
		if err == nil && r.IsError {
			err = fmt.Errorf("%s: tool error", name)
		}
		return err
	}
	for i := 0; i < 100; i++ {
		if err := call(direct, "read_text_file"); err != nil {
			return err
		}
		if err := call(gated, "fs__read_text_file"); err != nil {
			return err
		}
	}
	var dLat, gLat []time.Duration
	var dTotal, gTotal time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := call(direct, "read_text_file"); err != nil {
			return err
		}
		t1 := time.Now()
		if err := call(gated, "fs__read_text_file"); err != nil {
			return err
		}
		t2 := time.Now()
		dLat, gLat = append(dLat, t1.Sub(t0)), append(gLat, t2.Sub(t1))
		dTotal += t1.Sub(t0)
		gTotal += t2.Sub(t1)
	}
	p := measure.Percentile
	fmt.Printf("reads of each kind: %d (sequential, alternated)\n", n)
	fmt.Printf("straight to the upstream (stdio): p50 %.3f ms  p99 %.3f ms  %.0f calls/s\n", measure.MS(p(dLat, .5)), measure.MS(p(dLat, .99)), float64(n)/dTotal.Seconds())
	fmt.Printf("through Countersign's /mcp:      p50 %.3f ms  p99 %.3f ms  %.0f calls/s\n", measure.MS(p(gLat, .5)), measure.MS(p(gLat, .99)), float64(n)/gTotal.Seconds())
	fmt.Printf("added:                           p50 %.3f ms  p99 %.3f ms\n", measure.MS(p(gLat, .5)-p(dLat, .5)), measure.MS(p(gLat, .99)-p(dLat, .99)))
	return nil
}

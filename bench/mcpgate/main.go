// Command mcpgate measures what the MCP gateway adds: an allowed read
// (read_text_file of the official filesystem server, from .ci/mcp) straight
// to the upstream over stdio, against the same read through a plain MCP
// proxy that records nothing (supergateway, stdio to streamable HTTP, from
// .ci/mcp; and mcp-proxy, the same) and through Countersign's /mcp (agent key, gate, record, forward
// once) with the 2026-07-28 revision (stateless, what the Go SDK's client
// speaks by default) and with a 2025 session, and through a proxy of the Go
// SDK's own that records nothing (the floor of a hop built as Countersign's
// is), for a 2025 session and statelessly for 2026-07-28, and through that
// proxy with the least a gate must write (floor.go: the call committed
// before it is forwarded, its outcome and a signature over it after); same
// Go SDK client code, alternated, sequential. Each kind is read
// cold (after a pause in which every process idles) and warm (at once
// after a read of its own), so that none gains from following another kind
// the same process serves. BENCHMARKS.md.
//
//	make mcp-servers && go run ./bench/mcpgate -n 2000
//
// Countersign runs in this process (what -cpuprofile sees), or, with
// -serve BIN, as `countersign serve` from that binary, a process of its
// own as a user runs it:
//
//	go build -tags sqlite_fts5 -o /tmp/cs ./cmd/countersign && go run ./bench/mcpgate -n 1500 -serve /tmp/cs
//
// With -text-bytes or -media-bytes the read is of a big file instead: a
// text of that many bytes (read_text_file) or an image (read_media_file,
// its bytes base64 in an image block), to see what a big result costs.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

type bearer string

func (k bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

func main() {
	n := flag.Int("n", 2000, "reads of each kind")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the run here")
	textBytes := flag.Int("text-bytes", 0, "read a text file of this many bytes instead of one line")
	mediaBytes := flag.Int("media-bytes", 0, "read an image of this many bytes instead of a text")
	pause := flag.Duration("pause", 3*time.Millisecond, "how long every process idles before each cold read")
	memprofile := flag.String("memprofile", "", "write this process's allocations over the run (the allocs profile) here; with -serve, Countersign's are not in it")
	serve := flag.String("serve", "", "run Countersign as `countersign serve` from this binary, a process of its own (default: in this process, which -cpuprofile sees)")
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
	if err := run(*n, *textBytes, *mediaBytes, *serve, *pause); err != nil {
		pprof.StopCPUProfile()
		log.Fatal(err)
	}
	if *memprofile != "" {
		if err := writeAllocs(*memprofile); err != nil {
			log.Fatal(err)
		}
	}
}

// writeAllocs writes what the run allocated, sampled as the runtime does.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func run(n, textBytes, mediaBytes int, serve string, pause time.Duration) error {
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
	file, tool, err := fileToRead(dir, textBytes, mediaBytes)
	if err != nil {
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
	toolsYAML := fmt.Sprintf("mcp_servers:\n  - name: fs\n    command: node\n    args: [%q, %q]\n", script, dir)
	url, key, stopCS, err := countersign(ctx, serve, dir, toolsYAML)
	if err != nil {
		return err
	}
	defer stopCS()
	connect := func(url, version string, rt http.RoundTripper) (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rt}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	}
	gated, err := connect(url+"/mcp", "", bearer(key))
	if err != nil {
		return err
	}
	defer gated.Close()
	if gated.ID() != "" {
		return fmt.Errorf("the default client opened a session: not the stateless revision")
	}
	session, err := connect(url+"/mcp", "2025-11-25", bearer(key))
	if err != nil {
		return err
	}
	defer session.Close()
	plain, stop, err := plainProxies(script, dir, connect)
	if err != nil {
		return err
	}
	defer stop()
	sdk, stopSDK, err := sdkProxy(ctx, script, dir, tool, nil, false, connect)
	if err != nil {
		return err
	}
	defer stopSDK()
	sdkModern, stopSDKModern, err := sdkProxy(ctx, script, dir, tool, nil, true, connect)
	if err != nil {
		return err
	}
	defer stopSDKModern()
	floor, stopFloor, err := floorGate(ctx, script, dir, tool, connect)
	if err != nil {
		return err
	}
	defer stopFloor()
	kinds := []kind{
		{"straight to the upstream (stdio)", direct, tool},
		{"through supergateway (records nothing)", plain[0], tool},
		{"through mcp-proxy (records nothing)", plain[1], tool},
		{"through Countersign's /mcp, 2026-07-28", gated, "fs__" + tool},
		{"through Countersign's /mcp, 2025 session", session, "fs__" + tool},
		{"through a Go SDK proxy (records nothing)", sdk, tool},
		{"the same, 2026-07-28 (stateless)", sdkModern, tool},
		{"through a floor gate (2 commits, 1 sig)", floor, tool},
	}
	return compare(ctx, n, file, kinds, pause)
}

// countersign is Countersign over the tools file given: `countersign
// serve` from the binary serve (served.go), or, serve "", in this process
// (what -cpuprofile sees). It returns its URL and an agent key whose
// limits are lifted.
func countersign(ctx context.Context, serve, dir, toolsYAML string) (url, key string, stop func(), err error) {
	if serve != "" {
		return served(serve, dir, toolsYAML)
	}
	set, err := httptool.Load([]byte(toolsYAML), "bench", httptool.Options{})
	if err != nil {
		return "", "", nil, err
	}
	store, err := storage.Open(filepath.Join(dir, "cs.db"), storage.Options{})
	if err != nil {
		set.Close()
		return "", "", nil, err
	}
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	// One key sends every call: the per-agent rate limit is lifted.
	app, site := webtest.New(core.Config{Store: store, Tools: reg, Policy: pol, Log: slog.New(slog.DiscardHandler)},
		web.Config{AgentCallsPerSecond: 1_000_000, AgentCallBurst: 1_000_000})
	srv := httptest.NewServer(site.Handler())
	stop = func() { srv.Close(); app.Close(); store.Close(); set.Close() }
	key, _, err = app.Accounts.AddAgent(ctx, "bench", models.Actor{ID: "bench"})
	if err != nil {
		stop()
		return "", "", nil, err
	}
	return srv.URL, key, stop, nil
}

// fileToRead writes the file the reads are of, and says which tool reads
// it: one line of text, a big text, or an image of random bytes.
func fileToRead(dir string, textBytes, mediaBytes int) (file, tool string, err error) {
	file, tool, content := filepath.Join(dir, "a.txt"), "read_text_file", []byte("a line to read")
	switch {
	case mediaBytes > 0:
		file, tool, content = filepath.Join(dir, "a.png"), "read_media_file", make([]byte, mediaBytes)
		rand.Read(content)
	case textBytes > 0:
		line := []byte("a line of text to read, with <, > & \"quotes\"\n")
		content = bytes.Repeat(line, textBytes/len(line)+1)[:textBytes]
	}
	return file, tool, os.WriteFile(file, content, 0o600)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// kind is one way to reach the upstream: a client session and the name the
// tool has there.
type kind struct {
	label string
	cs    *mcp.ClientSession
	tool  string
}

// compare reads the file n times each way, alternated, after a warm-up.
// Each round reads once through each kind in turn, twice: the first read
// comes after a pause in which every process idles (cold: a client that
// calls now and then), the second at once after it (warm: a busy one).
// Every kind is measured both ways, so none gains from following another
// kind served by the same process.
func compare(ctx context.Context, n int, file string, kinds []kind, pause time.Duration) error {
	call := func(cs *mcp.ClientSession, name string) error {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": file}})
		if err == nil && r.IsError {
			err = fmt.Errorf("%s: tool error", name)
		}
		return err
	}
	for i := 0; i < min(100, n); i++ {
		for _, k := range kinds {
			if err := call(k.cs, k.tool); err != nil {
				return err
			}
		}
	}
	cold, warm := make([][]time.Duration, len(kinds)), make([][]time.Duration, len(kinds))
	for i := 0; i < n; i++ {
		for j, k := range kinds {
			time.Sleep(pause)
			for _, into := range []*[]time.Duration{&cold[j], &warm[j]} {
				t0 := time.Now()
				if err := call(k.cs, k.tool); err != nil {
					return err
				}
				*into = append(*into, time.Since(t0))
			}
		}
	}
	fmt.Printf("reads of each kind: %d each way (sequential, alternated)\n", n)
	report(fmt.Sprintf("cold: after %s with every process idle", pause), kinds, cold)
	report("warm: right after a read of the same kind", kinds, warm)
	return nil
}

// report prints each kind's latencies, and what it adds to the first
// kind's (straight to the upstream) at the median.
func report(title string, kinds []kind, lat [][]time.Duration) {
	p := measure.Percentile
	fmt.Println(title)
	for j, k := range kinds {
		var total time.Duration
		for _, d := range lat[j] {
			total += d
		}
		fmt.Printf("  %-42s p50 %.3f ms  p99 %.3f ms  %.0f calls/s", k.label+":", measure.MS(p(lat[j], .5)), measure.MS(p(lat[j], .99)), float64(len(lat[j]))/total.Seconds())
		if j > 0 {
			fmt.Printf("  added p50 %.3f ms", measure.MS(p(lat[j], .5)-p(lat[0], .5)))
		}
		fmt.Println()
	}
}

// plainProxies starts supergateway and mcp-proxy (stdio to streamable
// HTTP, one child each) in front of the same upstream, connected.
func plainProxies(script, dir string, connect func(url, version string, rt http.RoundTripper) (*mcp.ClientSession, error)) ([]*mcp.ClientSession, func(), error) {
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	var out []*mcp.ClientSession
	for _, p := range []struct {
		name string
		args func(int) []string
	}{
		{"supergateway", func(port int) []string {
			return []string{".ci/mcp/node_modules/supergateway/dist/index.js", "--stdio", fmt.Sprintf("node %q %q", script, dir),
				"--outputTransport", "streamableHttp", "--stateful", "--port", strconv.Itoa(port), "--logLevel", "none"}
		}},
		{"mcp-proxy", func(port int) []string {
			return []string{".ci/mcp/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs", "--port", strconv.Itoa(port), "--host", "127.0.0.1",
				"--server", "stream", "--", "node", script, dir}
		}},
	} {
		cs, end, err := plainProxy(p.name, p.args, connect)
		if err != nil {
			stop()
			return nil, nil, err
		}
		stops = append(stops, end, func() { cs.Close() })
		out = append(out, cs)
	}
	return out, stop, nil
}

// plainProxy starts a plain proxy (stdio to streamable HTTP, one child,
// node with the arguments args gives for a port) in front of the same
// upstream and connects to it.
func plainProxy(name string, args func(port int) []string, connect func(url, version string, rt http.RoundTripper) (*mcp.ClientSession, error)) (*mcp.ClientSession, func(), error) {
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	px := exec.Command("node", args(port)...)
	if err := px.Start(); err != nil {
		return nil, nil, err
	}
	stop := func() { px.Process.Kill(); px.Wait() }
	var proxied *mcp.ClientSession
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if proxied, err = connect(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "2025-11-25", http.DefaultTransport); err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return proxied, stop, nil
}

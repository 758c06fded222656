package gate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/countersign/countersign/agent/agenttest"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/demo"
)

// BenchmarkGateTelemetry is BenchmarkGateCall with metrics and tracing off
// and on, in one run: "metrics" counts into Prometheus metrics (the
// store's writer too); "on" also exports every span over OTLP/HTTP,
// protobuf and all, to a receiver here that takes and drops it. The target: on within 5% of
// off, serial and with 16 callers (BENCHMARKS.md). The modes take turns,
// three rounds of each, so that a shared machine's noise falls on both:
// compare the medians.
func BenchmarkGateTelemetry(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	for _, bc := range []struct {
		name    string
		callers int
	}{{"serial", 1}, {"callers16", 16}} {
		for round := range 9 {
			mode := [...]string{"off", "metrics", "on"}[round%3]
			b.Run(fmt.Sprintf("%s/%s/%d", bc.name, mode, round/3+1), func(b *testing.B) {
				var options []func(*core.Config)
				if mode == "on" {
					stop := startTracing(b, collector.URL)
					defer stop()
				}
				if mode != "off" {
					options = append(options, func(c *core.Config) {
						pool, err := c.Store.Pool()
						if err != nil {
							b.Fatal(err)
						}
						c.Metrics = telemetry.NewMetrics(pool, c.Store)
						c.Store.Observe(c.Metrics)
					})
				}
				e := agenttest.New(b, demo.Shop, options...)
				run := e.NewRun("cus_alice", "Alice")
				req := gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "get_order_status", Args: []byte(`{"order_id":"A1002"}`)}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				if bc.callers == 1 {
					for i := 0; i < b.N; i++ {
						if out, err := e.Gate.Call(ctx, req); err != nil || out.Status != "succeeded" {
							b.Fatal(out, err)
						}
					}
					return
				}
				procs := runtime.GOMAXPROCS(0)
				b.SetParallelism((bc.callers + procs - 1) / procs)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if out, err := e.Gate.Call(ctx, req); err != nil || out.Status != "succeeded" {
							b.Error(out, err)
							return
						}
					}
				})
			})
		}
	}
}

// startTracing is telemetry.StartTracing's provider, pointed at url.
func startTracing(b *testing.B, url string) func() {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return func() {
		tp.Shutdown(context.Background())
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	}
}

package main

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/countersign/countersign/agent/telemetry"
)

// observe sets up what the operator asked to see: Prometheus metrics on
// --metrics-addr (the store's writer reports to them) and traces over
// OTLP/HTTP. It returns what undoes it.
func (a *App) observe(ctx context.Context) (undo func(), err error) {
	cfg := a.cfg
	undo = func() {}
	if cfg.MetricsAddr != "" {
		pool, err := a.store.Pool()
		if err != nil {
			return undo, err
		}
		a.metrics = telemetry.NewMetrics(pool, a.store)
		a.store.Observe(a.metrics)
	}
	if telemetry.TracingWanted(cfg.OTLPEndpoint, os.Getenv) {
		stop, err := telemetry.StartTracing(ctx, cfg.OTLPEndpoint, release())
		if err != nil {
			return undo, err
		}
		a.stopTracing = stop
		a.log.Info("exporting traces over OTLP/HTTP", "endpoint", cmp.Or(cfg.OTLPEndpoint, "(from OTEL_EXPORTER_OTLP_*)"))
		undo = func() { a.flushTraces() }
	}
	return undo, nil
}

// flushTraces sends the spans still held and stops the export.
func (a *App) flushTraces() {
	if a.stopTracing == nil {
		return
	}
	if err := a.stopTracing(context.Background()); err != nil {
		a.log.Warn("could not send the last spans", "err", err)
	}
	a.stopTracing = nil
}

// listenMetrics binds --metrics-addr (":0" picks a port, see MetricsAddr).
func (a *App) listenMetrics() error {
	if a.metrics == nil || a.metricsLn != nil {
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
	if err != nil {
		return err
	}
	a.metricsLn = ln
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.Handler())
	a.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	return nil
}

// MetricsAddr is the address metrics are served on ("" when off).
func (a *App) MetricsAddr() string {
	if a.metricsLn == nil {
		return ""
	}
	return a.metricsLn.Addr().String()
}

// serveMetrics serves /metrics until stopMetrics.
func (a *App) serveMetrics() {
	if a.metricsSrv == nil {
		return
	}
	go func() {
		if err := a.metricsSrv.Serve(a.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("the metrics server stopped", "err", err)
		}
	}()
}

func (a *App) stopMetrics(ctx context.Context) {
	if a.metricsSrv != nil {
		a.metricsSrv.Shutdown(ctx)
	}
}

// Package telemetry is what Countersign tells the operator's own tools:
// Prometheus metrics (metrics.go, served on --metrics-addr) and
// OpenTelemetry traces (traces.go, exported over OTLP/HTTP). Both are off
// unless asked for; a nil *Metrics records nothing, and without a tracer
// provider the spans are OpenTelemetry's no-ops.
//
// Every label is bounded: a verdict, a status, a tool or a rule of the
// configuration, a channel, a provider. No call, run, customer or staff id
// is ever a label.
package telemetry

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// Metrics are Countersign's Prometheus metrics, on a registry of their own.
type Metrics struct {
	registry *prometheus.Registry

	decisions      *prometheus.CounterVec
	calls          *prometheus.CounterVec
	actionDecided  *prometheus.HistogramVec
	callOutcome    *prometheus.HistogramVec
	toolSeconds    *prometheus.HistogramVec
	toolErrors     *prometheus.CounterVec
	deliveries     *prometheus.CounterVec
	deliveryLag    *prometheus.HistogramVec
	modelRequests  *prometheus.CounterVec
	modelSeconds   *prometheus.HistogramVec
	batchUnits     prometheus.Histogram
	commitSeconds  prometheus.Histogram
	reloadFailures prometheus.Counter
}

// Waiting is what the database says is waiting right now, read at each
// scrape (the store's queries: cheap, by index).
type Waiting interface {
	WaitingActions(ctx context.Context) (n int64, oldest time.Time, err error)
	QueuedDeliveries(ctx context.Context) ([]storage.QueuedChannel, error)
}

// humanBuckets are for waits on people: a second to a day.
var humanBuckets = []float64{1, 3, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600}

// NewMetrics makes the metrics, with the Go runtime's, the process's and
// the database pool's beside them.
func NewMetrics(pool *sql.DB, waiting Waiting) *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry()}
	f := factory{m.registry}
	m.decisions = f.counter("countersign_gate_decisions_total", "Decisions of the policy on tool calls.", "verdict", "tool", "rule")
	m.calls = f.counter("countersign_tool_calls_total", "Tool calls entering each status (committed).", "status")
	m.actionDecided = f.histogram("countersign_action_decision_seconds",
		"Time from a call being held for a person to its decision.", humanBuckets, "outcome")
	m.callOutcome = f.histogram("countersign_call_outcome_seconds",
		"Time from a call's decision to its outcome being recorded.", prometheus.DefBuckets, "tool")
	m.toolSeconds = f.histogram("countersign_tool_execution_seconds", "Time tools took to run.", prometheus.DefBuckets, "tool")
	m.toolErrors = f.counter("countersign_tool_errors_total", "Tool executions that failed or whose outcome is unknown.", "tool", "kind")
	m.deliveries = f.counter("countersign_outbox_deliveries_total",
		"Delivery attempts of notifications, by channel and result (delivered, retrying, failed).", "channel", "result")
	m.deliveryLag = f.histogram("countersign_outbox_delivery_lag_seconds",
		"Time from a notification being queued to its delivery.", prometheus.DefBuckets, "channel")
	m.modelRequests = f.counter("countersign_model_requests_total", "Requests to the model, by provider and result (ok, error).", "provider", "result")
	m.modelSeconds = f.histogram("countersign_model_request_duration_seconds", "Time the model took to answer.",
		[]float64{.1, .25, .5, 1, 2, 5, 10, 20, 40, 60, 120}, "provider")
	m.batchUnits = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "countersign_store_write_batch_units",
		Help: "Units of work committed together by the store's writer.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "countersign_store_commit_seconds",
		Help: "Time the store's COMMIT took.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}})
	m.reloadFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "countersign_policy_reload_failures_total",
		Help: "Reloads of the policy or the tools that failed (the old ones stay in force)."})
	m.registry.MustRegister(m.batchUnits, m.commitSeconds, m.reloadFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pool != nil {
		m.registry.MustRegister(collectors.NewDBStatsCollector(pool, "countersign"))
	}
	if waiting != nil {
		m.registry.MustRegister(&waitingCollector{waiting: waiting})
	}
	return m
}

type factory struct{ r *prometheus.Registry }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.r.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.r.MustRegister(h)
	return h
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Registry is the metrics' registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// ruleLabel is a rule as a label: a standing grant's rule names the grant
// (grant:grant_…), and no label is ever an id.
func ruleLabel(rule string) string {
	if strings.HasPrefix(rule, "grant:") {
		return "grant"
	}
	return rule
}

// Decided counts a decision of the policy that was recorded.
func (m *Metrics) Decided(verdict, tool, rule string) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(verdict, tool, ruleLabel(rule)).Inc()
}

// ActionDecided observes how long a held call waited for its outcome:
// approved, rejected, expired or cancelled.
func (m *Metrics) ActionDecided(outcome string, waited time.Duration) {
	if m == nil {
		return
	}
	m.actionDecided.WithLabelValues(outcome).Observe(waited.Seconds())
}

// Executed observes a tool's run: how long it took, from its decision to
// its recorded outcome, and whether it failed ("failed", "unknown") or not ("").
func (m *Metrics) Executed(tool string, took, sinceDecision time.Duration, failure string) {
	if m == nil {
		return
	}
	m.toolSeconds.WithLabelValues(tool).Observe(took.Seconds())
	m.callOutcome.WithLabelValues(tool).Observe(sinceDecision.Seconds())
	if failure != "" {
		m.toolErrors.WithLabelValues(tool, failure).Inc()
	}
}

// Delivered counts an attempt at a delivery: result is delivered, retrying
// or failed; lag (for a delivered one) is how long it was queued.
func (m *Metrics) Delivered(channel, result string, lag time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(channel, result).Inc()
	if result == "delivered" {
		m.deliveryLag.WithLabelValues(channel).Observe(lag.Seconds())
	}
}

// ModelAnswered observes a request to the model.
func (m *Metrics) ModelAnswered(provider string, took time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.modelRequests.WithLabelValues(provider, result).Inc()
	m.modelSeconds.WithLabelValues(provider).Observe(took.Seconds())
}

// ReloadFailed counts a reload that failed.
func (m *Metrics) ReloadFailed() {
	if m == nil {
		return
	}
	m.reloadFailures.Inc()
}

// Committed is the store's writer committing a batch (storage.Observer).
func (m *Metrics) Committed(units int, commit time.Duration, entered []models.CallStatus) {
	if m == nil {
		return
	}
	m.batchUnits.Observe(float64(units))
	m.commitSeconds.Observe(commit.Seconds())
	for _, s := range entered {
		m.calls.WithLabelValues(string(s)).Inc()
	}
}

// waitingCollector reads what waits from the database at each scrape.
type waitingCollector struct{ waiting Waiting }

var (
	waitingDesc = prometheus.NewDesc("countersign_actions_waiting", "Actions waiting for a person (every instance's).", nil, nil)
	oldestDesc  = prometheus.NewDesc("countersign_actions_oldest_waiting_seconds",
		"How long the oldest waiting action has waited (0: none waits).", nil, nil)
	queuedDesc       = prometheus.NewDesc("countersign_outbox_queued", "Notifications queued for delivery.", []string{"channel"}, nil)
	queuedOldestDesc = prometheus.NewDesc("countersign_outbox_oldest_queued_seconds",
		"How long the oldest queued notification has waited, by channel.", []string{"channel"}, nil)
)

func (c *waitingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- waitingDesc
	ch <- oldestDesc
	ch <- queuedDesc
	ch <- queuedOldestDesc
}

func (c *waitingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, oldest, err := c.waiting.WaitingActions(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(waitingDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(n))
		age := 0.0
		if n > 0 {
			age = max(time.Since(oldest).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
	}
	queued, err := c.waiting.QueuedDeliveries(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queuedDesc, err)
		return
	}
	for _, q := range queued {
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(q.Queued), q.Channel)
		ch <- prometheus.MustNewConstMetric(queuedOldestDesc, prometheus.GaugeValue, max(time.Since(q.Oldest).Seconds(), 0), q.Channel)
	}
}

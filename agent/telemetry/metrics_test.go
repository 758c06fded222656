package telemetry_test

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// The Grafana dashboard in examples/ reads only metrics Countersign serves,
// by their names; and those names follow Prometheus's conventions.
func TestTheDashboardReadsTheMetricsServed(t *testing.T) {
	store := storetest.Open(t)
	pool, err := store.Pool()
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics(pool, store)
	// A vector shows once it has a child: one of each.
	m.Decided("allow", "t", "r")
	m.ActionDecided("approved", time.Second)
	m.Executed("t", time.Millisecond, time.Millisecond, "failed")
	m.Delivered("webhook", "delivered", time.Second)
	m.ModelAnswered("offline", time.Millisecond, errors.New("down"))
	m.Committed(3, time.Millisecond, []models.CallStatus{models.CallAllowed})
	// A notification queued, so the outbox's gauges have a channel.
	if err := store.Write(t.Context(), func(tx *storage.Tx) error {
		return tx.Enqueue(&models.Delivery{Channel: "webhook", Target: "https://x.test/hook", Event: "action.pending", Subject: "call_1", Body: "{}"})
	}); err != nil {
		t.Fatal(err)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, f := range families {
		name := f.GetName()
		served[name] = true
		if strings.HasPrefix(name, "countersign_") {
			switch f.GetType().String() {
			case "COUNTER":
				if !strings.HasSuffix(name, "_total") {
					t.Errorf("the counter %s does not end in _total", name)
				}
			case "HISTOGRAM":
				served[name+"_bucket"], served[name+"_sum"], served[name+"_count"] = true, true, true
			}
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "id" || strings.HasSuffix(l.GetName(), "_id") {
					t.Errorf("%s has an id label %s: unbounded", name, l.GetName())
				}
			}
		}
	}
	for _, want := range []string{"countersign_actions_waiting", "countersign_actions_oldest_waiting_seconds",
		"go_goroutines", "go_sql_open_connections", "process_cpu_seconds_total"} {
		if !served[want] {
			t.Errorf("%s is not served", want)
		}
	}

	raw, err := os.ReadFile("../../examples/grafana/countersign.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\b(countersign|go|process)_[a-z_]+\b`)
	read := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, n := range name.FindAllString(target.Expr, -1) {
				read++
				if !served[n] {
					t.Errorf("the panel %q reads %s, which is not served", p.Title, n)
				}
			}
		}
	}
	if read < 20 {
		t.Fatalf("the dashboard reads only %d metrics", read)
	}
}

// No label is ever an id: a call a standing grant allowed counts under the
// rule "grant", not under the grant's id (50 grants made 50 series).
func TestGrantRulesAreOneLabel(t *testing.T) {
	m := telemetry.NewMetrics(nil, nil)
	for _, id := range []string{"grant:grant_a", "grant:grant_b", "grant:grant_c"} {
		m.Decided("allow", "issue_refund", id)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "countersign_gate_decisions_total" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%d series for three grants", len(f.GetMetric()))
		}
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() == "rule" && l.GetValue() != "grant" {
				t.Fatalf("rule label %q", l.GetValue())
			}
		}
		return
	}
	t.Fatal("no decisions counted")
}

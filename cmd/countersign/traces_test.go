package main

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP/HTTP trace receiver: it decodes what it is sent with
// the official OTLP protobuf definitions.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not OTLP/HTTP protobuf", http.StatusBadRequest)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	raw, _ := io.ReadAll(body)
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// inTrace is the spans received of one trace, by name.
func (r *receiver) inTrace(traceID string) map[string]*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]*tracepb.Span{}
	for _, s := range r.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			out[s.Name] = s
		}
	}
	return out
}

func attrs(s *tracepb.Span) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value.GetStringValue()
	}
	return out
}

// A call held for a person and then approved, asked with the caller's
// traceparent, reaches an OTLP receiver as one tree in the caller's trace:
// execute_tool under the caller's span, with decide, wait_for_approval (the
// approver named) and execute under it; the HTTP tool's backend is asked
// within that trace, under the execute span.
func TestTracesOfAHeldCallContinueTheCallersTrace(t *testing.T) {
	recv := &receiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	o := startObserved(t, config{OTLPEndpoint: collector.URL})

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c := o.call(t, "pay", 1, "00-"+traceID+"-"+callerSpan+"-01")
	if c["status"] != "pending" {
		t.Fatalf("pay: %v", c)
	}
	id := c["id"].(string)
	time.Sleep(50 * time.Millisecond) // a wait a person can see in the span
	o.approve(t, id)
	o.app.flushTraces()

	spans := recv.inTrace(traceID)
	root := spans["execute_tool pay"]
	if root == nil {
		t.Fatalf("no execute_tool span in the caller's trace; got %d spans: %v", len(spans), spans)
	}
	if got := hex.EncodeToString(root.ParentSpanId); got != callerSpan {
		t.Errorf("execute_tool's parent is %s, want the caller's span %s", got, callerSpan)
	}
	a := attrs(root)
	for k, v := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay", "gen_ai.tool.call.id": id,
		"countersign.verdict": "needs_approval", "countersign.rule": "pay-needs-a-person"} {
		if a[k] != v {
			t.Errorf("execute_tool's %s = %q, want %q", k, a[k], v)
		}
	}
	if a["countersign.policy_version"] == "" {
		t.Error("execute_tool names no policy version")
	}
	for _, name := range []string{"decide", "wait_for_approval", "execute"} {
		s := spans[name]
		if s == nil {
			t.Fatalf("no %s span in the trace", name)
		}
		if string(s.ParentSpanId) != string(root.SpanId) {
			t.Errorf("%s is not under execute_tool", name)
		}
	}
	wait := spans["wait_for_approval"]
	if w := attrs(wait); !strings.Contains(w["countersign.approver"], "Ann") || w["countersign.outcome"] != "approved" {
		t.Errorf("wait_for_approval says %v", w)
	}
	if took := time.Duration(wait.EndTimeUnixNano - wait.StartTimeUnixNano); took < 50*time.Millisecond {
		t.Errorf("wait_for_approval lasted %s, less than the wait", took)
	}
	seen := o.backend.seen()
	want := "00-" + traceID + "-" + hex.EncodeToString(spans["execute"].SpanId) + "-01"
	if len(seen) != 1 || seen[0] != want {
		t.Errorf("the backend was sent traceparent %q, want %q", seen, want)
	}
}

package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
)

// An MCP client's traceparent in the request's _meta continues its trace:
// the gate call's span is under the client's, and the call keeps the trace
// for what happens to it later. A _meta trace that is not one is ignored.
func TestMCPMetaTraceparentContinuesTheTrace(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
	set, _ := gateAPITools(t)
	a := mcpApp(t, set, nil, 300*time.Millisecond)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "desktop", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	const traceID, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A7", "amount": 900},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + parent + "-01"}})
	if err != nil || !strings.Contains(textOf(r), "Waiting for a person") {
		t.Fatalf("refund: %v %s", err, textOf(r))
	}
	var tool sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "execute_tool refund_order" {
			tool = s
		}
	}
	if tool == nil || tool.SpanContext().TraceID().String() != traceID || tool.Parent().SpanID().String() != parent {
		t.Fatalf("the gate call's span is not under the client's: %+v", tool)
	}
	pending, _ := a.store.PendingActions(ctx, models.ActionFilter{})
	call, _ := a.store.ToolCall(ctx, pending[0].ID)
	if want := "00-" + traceID + "-" + tool.SpanContext().SpanID().String() + "-01"; call.Trace != want {
		t.Fatalf("the held call keeps trace %q, want %q", call.Trace, want)
	}

	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "A7"},
		Meta: mcp.Meta{"traceparent": "00-not-a-trace-01"}})
	if err != nil || r.IsError {
		t.Fatalf("a call with a broken traceparent: %v %s", err, textOf(r))
	}
	for _, s := range spans.Ended() {
		if s.Name() == "execute_tool lookup_order" && s.Parent().IsValid() {
			t.Fatalf("a broken traceparent made a parent: %v", s.Parent())
		}
	}
}

// The server samples its own spans: a caller's traceparent saying "not
// sampled" (flags 00) still joins the gate's spans to its trace, and does
// not silence them. A tool name an agent made up is not a span's name.
func TestTheServerSamplesItsOwnSpansAndNamesThemItself(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithSampler(telemetry.Sampler()))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := a.doWith("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A1"},"session":"s1"}`,
		"traceparent", "00-"+traceID+"-"+parent+"-00")
	if r.Status != 201 {
		t.Fatalf("call: %d %s", r.Status, r.Raw)
	}
	var tool sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "execute_tool lookup_order" {
			tool = s
		}
	}
	if tool == nil || !tool.SpanContext().IsSampled() || tool.SpanContext().TraceID().String() != traceID {
		t.Fatalf("a caller's flags 00 silenced the gate's span, or it left the caller's trace: %+v", tool)
	}
	for i := 0; i < 5; i++ {
		a.do("POST", "/api/v1/calls", key, `{"tool":"made_up_`+string(rune('a'+i))+`","args":{},"session":"s1"}`)
	}
	names := map[string]bool{}
	for _, s := range spans.Ended() {
		names[s.Name()] = true
		if strings.Contains(s.Name(), "made_up") {
			t.Fatalf("an agent's made-up tool name became a span name: %q", s.Name())
		}
	}
	if !names["execute_tool (unknown tool)"] {
		t.Fatalf("no span for the unknown tools: %v", names)
	}
}

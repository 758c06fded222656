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

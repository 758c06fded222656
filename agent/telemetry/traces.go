package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The attributes Countersign adds to the GenAI semantic conventions' own.
const (
	AttrVerdict       = attribute.Key("countersign.verdict")
	AttrRule          = attribute.Key("countersign.rule")
	AttrPolicyVersion = attribute.Key("countersign.policy_version")
	AttrStatus        = attribute.Key("countersign.status")
	AttrApprover      = attribute.Key("countersign.approver")
	AttrOutcome       = attribute.Key("countersign.outcome")
)

// Tracer is the tracer of every Countersign span: the global provider's,
// a no-op until StartTracing sets one.
func Tracer() trace.Tracer { return otel.Tracer("github.com/countersign/countersign") }

// TracingWanted says whether traces are asked for: the flag's endpoint, or
// the standard OTEL_EXPORTER_OTLP_ENDPOINT / _TRACES_ENDPOINT variables
// (unless OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none says no).
func TracingWanted(endpoint string, getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return endpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// StartTracing exports spans over OTLP/HTTP and makes W3C trace context
// the propagation of incoming and outgoing requests. endpoint is a base URL
// (http://collector:4318; spans go to its /v1/traces); "" leaves it to the
// standard OTEL_EXPORTER_OTLP_* variables, which also set headers,
// timeouts and TLS. The returned function flushes and stops the export.
func StartTracing(ctx context.Context, endpoint, version string) (func(context.Context) error, error) {
	var opts []otlptracehttp.Option
	if endpoint != "" {
		if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
			return nil, fmt.Errorf("--otlp-endpoint %q: give a URL such as http://localhost:4318", endpoint)
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("the OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(serviceName()), semconv.ServiceVersion(version)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("the trace resource: %w", err)
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		tpOpts = append(tpOpts, sdktrace.WithSampler(Sampler()))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// Off again: a server started after this one in the process
		// (tests) traces only if it asks.
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		return tp.Shutdown(ctx)
	}, nil
}

func serviceName() string {
	if s := os.Getenv("OTEL_SERVICE_NAME"); s != "" {
		return s
	}
	return "countersign"
}

// Continue is ctx with the trace a caller sent (a W3C traceparent and
// tracestate, from an HTTP request's headers or an MCP request's _meta),
// so that the spans made under it join the caller's trace. Without
// tracing on it is ctx.
func Continue(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, carrier)
}

// Inject writes ctx's trace into carrier (an outgoing request's headers).
func Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	otel.GetTextMapPropagator().Inject(ctx, carrier)
}

// Parent is the traceparent of ctx's span ("" when it is not recorded),
// kept with a call so that what happens to it later (a person's decision,
// its execution) joins its trace.
func Parent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

// Resume is ctx under the span a traceparent kept by Parent names (ctx
// itself when that span is already ctx's).
func Resume(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" || traceparent == Parent(ctx) {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Sampler is the server's choice for its own spans (unless
// OTEL_TRACES_SAMPLER chooses otherwise): every one is sampled. A caller's
// traceparent joins them to its trace, but its "not sampled" flag does not
// silence the gate, whose record of a call is the operator's, not the
// caller's, to keep.
func Sampler() sdktrace.Sampler {
	return sdktrace.ParentBased(sdktrace.AlwaysSample(), sdktrace.WithRemoteParentNotSampled(sdktrace.AlwaysSample()))
}

// ToolSpan starts the span of one gate call, named as the GenAI semantic
// conventions name tool execution; EndTool ends it.
func ToolSpan(ctx context.Context, tool string) (context.Context, trace.Span) {
	return Tracer().Start(ctx, "execute_tool "+tool)
}

// ToolCall is what the span of a gate call says of it.
type ToolCall struct {
	Tool, ID, Verdict, Rule, PolicyVersion, Status string
}

// EndTool gives a gate call's span its attributes, all at once (one
// allocation, not one per attribute), and ends it.
func EndTool(span trace.Span, c ToolCall) {
	if !span.IsRecording() {
		return
	}
	attrs := [...]attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(c.Tool),
		semconv.GenAIToolCallID(c.ID), AttrVerdict.String(c.Verdict), AttrRule.String(c.Rule),
		AttrPolicyVersion.String(c.PolicyVersion), AttrStatus.String(c.Status)}
	n := len(attrs)
	if c.Verdict == "" { // invalid: nothing was decided
		attrs[3], attrs[6] = attrs[6], attrs[3]
		n = 4
	}
	span.SetAttributes(attrs[:n]...)
	span.End()
}

// CallID is the GenAI conventions' attribute for a tool call's id.
func CallID(id string) attribute.KeyValue { return semconv.GenAIToolCallID(id) }

// WaitSpan records, once a held call is decided, the time it waited for a
// person, from held to decided, under the call's span.
func WaitSpan(traceparent string, held, decided time.Time, outcome, approver string) {
	if traceparent == "" {
		return
	}
	_, span := Tracer().Start(Resume(context.Background(), traceparent), "wait_for_approval",
		trace.WithTimestamp(held), trace.WithAttributes(AttrOutcome.String(outcome), AttrApprover.String(approver)))
	span.End(trace.WithTimestamp(decided))
}

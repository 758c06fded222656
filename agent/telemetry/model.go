package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/countersign/countersign/agent/llm"
)

// WatchModel is model with each request counted and timed (Metrics) and
// traced as a GenAI "chat" span. With neither on it is model itself.
func WatchModel(provider, name string, model llm.Model, m *Metrics) llm.Model {
	return watchedModel{provider: provider, name: name, model: model, metrics: m}
}

type watchedModel struct {
	provider, name string
	model          llm.Model
	metrics        *Metrics
}

func (w watchedModel) Next(ctx context.Context, req llm.Request) (llm.Reply, error) {
	ctx, span := Tracer().Start(ctx, "chat "+w.name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.GenAIOperationNameChat, semconv.GenAIProviderNameKey.String(w.provider),
			semconv.GenAIRequestModel(w.name)))
	defer span.End()
	began := time.Now()
	reply, err := w.model.Next(ctx, req)
	w.metrics.ModelAnswered(w.provider, time.Since(began), err)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return reply, err
}

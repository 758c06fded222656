package tools_test

import "testing"

// BenchmarkNormalize is one refund's arguments validated against the
// schema, decoded, and encoded canonically (BENCHMARKS.md).
func BenchmarkNormalize(b *testing.B) {
	raw := []byte(`{"order_id":"A1002","amount":900,"reason":"arrived broken"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := refundTool.Normalize(raw); err != nil {
			b.Fatal(err)
		}
	}
}

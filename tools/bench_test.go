package tools_test

import "testing"

func BenchmarkNormalizeFlat(b *testing.B) {
	raw := []byte(`{"order_id":"A1002","amount":900,"reason":"arrived broken"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sortedTool.Normalize(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// The same input through the generic path (fields not in JSON-name order):
// what the flat codec saves (BENCHMARKS.md).
func BenchmarkNormalizeGeneric(b *testing.B) {
	raw := []byte(`{"order_id":"A1002","amount":900,"reason":"arrived broken"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := refundTool.Normalize(raw); err != nil {
			b.Fatal(err)
		}
	}
}

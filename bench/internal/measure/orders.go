package measure

import (
	"net/http"
	"net/http/httptest"
	"strings"
)

// OrderBackend is an order service that answers every GET /orders/{id}
// at once with a small JSON body: the backend the gate API benchmarks call.
func OrderBackend() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"order_id":"` + strings.TrimPrefix(r.URL.Path, "/orders/") + `","status":"delivered","total":1200}`))
	}))
}

// LookupOrderTools is a tools file with one allowed read, lookup_order,
// over the OrderBackend at base.
func LookupOrderTools(base string) []byte {
	return []byte(`tools:
  - name: lookup_order
    risk: read
    idempotent: true
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    http: {method: GET, url: "` + base + `/orders/{order_id}"}
`)
}

// Command shopbackend is a small order system for trying Countersign with
// your own tools (examples/tools.yaml): orders in memory, a lookup, refunds
// that check Countersign's signature and use its Idempotency-Key, so a
// retried refund is paid once. docs/tutorials/your-own-tools.md, "Try it with your own backend".
//
//	SHOP_SIGNING_SECRET=… go run ./examples/shopbackend -addr 127.0.0.1:8090
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

type order struct {
	ID       string  `json:"order_id"`
	Customer string  `json:"customer_id"`
	Item     string  `json:"item"`
	Total    float64 `json:"total"`
	Refunded float64 `json:"refunded"`
	Status   string  `json:"status"`
}

type refund struct {
	ID      string  `json:"refund_id"`
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
	Key     string  `json:"idempotency_key"`
}

type shop struct {
	secret []byte
	mu     sync.Mutex
	orders map[string]*order
	byKey  map[string]*refund
	all    []*refund
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on (port 0 picks one)")
	flag.Parse()
	s := &shop{secret: []byte(os.Getenv("SHOP_SIGNING_SECRET")), byKey: map[string]*refund{}, orders: map[string]*order{
		"A1001": {ID: "A1001", Customer: "cus_alice", Item: "Kettle", Total: 45, Status: "delivered"},
		"A1002": {ID: "A1002", Customer: "cus_alice", Item: "Espresso machine", Total: 1200, Status: "delivered"},
		"B2001": {ID: "B2001", Customer: "cus_bob", Item: "Standing desk", Total: 1500, Status: "shipped"},
	}}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("shop backend listening on http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, s.routes()))
}

func (s *shop) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", s.lookup)
	mux.HandleFunc("POST /refunds", s.refund)
	mux.HandleFunc("GET /refunds", s.refunds)
	return mux
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *shop) lookup(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[r.PathValue("id")]
	if !ok {
		reply(w, http.StatusNotFound, map[string]string{"error": "there is no order " + r.PathValue("id")})
		return
	}
	reply(w, http.StatusOK, map[string]any{"order_id": o.ID, "item": o.Item, "total": o.Total, "status": o.Status,
		"left_to_refund": o.Total - o.Refunded})
}

// refund pays once per Idempotency-Key, after checking the signature.
func (s *shop) refund(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		reply(w, http.StatusBadRequest, map[string]string{"error": "unreadable body"})
		return
	}
	if len(s.secret) > 0 && !verify(s.secret, r.Header.Get("X-Countersign-Signature"), body, time.Now()) {
		reply(w, http.StatusUnauthorized, map[string]string{"error": "bad signature"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		reply(w, http.StatusBadRequest, map[string]string{"error": "an Idempotency-Key is required"})
		return
	}
	var in struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		reply(w, http.StatusBadRequest, map[string]string{"error": "the body is not the refund's JSON"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prior, ok := s.byKey[key]; ok {
		reply(w, http.StatusOK, prior) // a retry: the refund already made
		return
	}
	o, ok := s.orders[in.OrderID]
	if !ok {
		reply(w, http.StatusNotFound, map[string]string{"error": "there is no order " + in.OrderID})
		return
	}
	if left := o.Total - o.Refunded; in.Amount > left {
		reply(w, http.StatusUnprocessableEntity, map[string]string{"error": fmt.Sprintf("only $%.2f of order %s is left to refund", left, o.ID)})
		return
	}
	o.Refunded += in.Amount
	rf := &refund{ID: "rf_" + strconv.Itoa(len(s.all)+1), OrderID: o.ID, Amount: in.Amount, Key: key}
	s.byKey[key] = rf
	s.all = append(s.all, rf)
	reply(w, http.StatusOK, rf)
}

// refunds lists every refund paid, for checking.
func (s *shop) refunds(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reply(w, http.StatusOK, map[string]any{"refunds": s.all})
}

// verify checks X-Countersign-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">.
func verify(secret []byte, header string, body []byte, now time.Time) bool {
	ts, sig, ok := strings.Cut(strings.TrimPrefix(header, "t="), ",v1=")
	t, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || now.Sub(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return hmac.Equal([]byte(sig), []byte(hex.EncodeToString(mac.Sum(nil))))
}

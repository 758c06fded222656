package runloop_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/agent/agenttest"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/demo/shop"
)

// env is the run loop over a real gate (agenttest), with the helpers the
// run loop's tests add (runner_test.go).
type env struct{ *agenttest.Env }

func newEnv(t testing.TB) *env { return &env{agenttest.New(t, demo.Shop)} }

var (
	approver1  = agenttest.Approver1
	supervisor = agenttest.Supervisor
	auditor    = agenttest.Auditor
)

// Order reads a demo order (A… is Alice's, B… Bob's).
func (e *env) Order(id string) *shop.Order {
	e.T.Helper()
	o, err := shop.On(e.Store).CustomerOrder(context.Background(), "cus_"+map[byte]string{'A': "alice", 'B': "bob"}[id[0]], id)
	if err != nil {
		e.T.Fatal(err)
	}
	return o
}

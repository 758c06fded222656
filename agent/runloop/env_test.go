package runloop_test

import (
	"testing"

	"github.com/countersign/countersign/agent/agenttest"
)

// env is the run loop over a real gate (agenttest), with the helpers the
// run loop's tests add (runner_test.go).
type env struct{ *agenttest.Env }

func newEnv(t testing.TB) *env { return &env{agenttest.New(t)} }

var (
	approver1  = agenttest.Approver1
	supervisor = agenttest.Supervisor
	auditor    = agenttest.Auditor
)

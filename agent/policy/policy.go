// Package policy decides about a tool call: allow, needs approval or deny,
// with the rule and the policy version an auditor needs. It holds the Policy
// interface, the facts a policy may ask for, and the YAML file policy (rules
// with CEL conditions, totals over earlier calls, self-tests). It knows the
// tools' risks and the staff roles, and nothing of the gate that asks it.
package policy

import (
	"context"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Verdict is what a policy says about a call.
type Verdict string

// The three verdicts, as calls record them.
const (
	Allow         Verdict = models.DecidedAllow
	NeedsApproval Verdict = models.DecidedNeedsApproval
	Deny          Verdict = models.DecidedDeny
)

// Decision is a policy's verdict with everything an auditor needs to know
// why: the rule that matched and the version of the policy.
type Decision struct {
	Verdict       Verdict
	Reason        string
	Rule          string // the rule's name, or "default:<risk>"
	PolicyVersion string
	// For NeedsApproval: how many distinct approvers, the least role one of
	// them must hold, and how long the action may wait (0: forever).
	Approvals int
	Role      models.StaffRole
	Expires   time.Duration
	// Passkey: every verdict on the action is signed with a passkey.
	Passkey bool
}

// CustomerFacts is what a policy may know about the run's customer.
type CustomerFacts struct {
	ID         string
	Name       string
	SignedIn   bool
	Attributes map[string]any
	// Business holds facts the business keeps about the customer, from its
	// own systems (the demo shop adds refunded_24h, in dollars). A policy
	// reads them beside the others: customer.refunded_24h. They never
	// replace id, name, signed_in or attributes.
	Business map[string]any
}

// RunFacts is what a policy may know about the run so far.
type RunFacts struct {
	ID          string
	Channel     string
	Calls       int64 // calls recorded in the run before this one
	CallsByTool map[string]int64
}

// TotalQuery asks for the sum of one numeric argument over the earlier
// calls of a tool that are done, running or waiting for a person (failed,
// refused, rejected, expired and cancelled ones do not count), for the same
// customer (the same run when the customer is anonymous). A policy file
// declares them under totals:.
type TotalQuery struct {
	Name  string // as the policy names it: totals.<name>
	Tool  string
	Field string
	// Same holds arguments an earlier call must share with this one
	// (order_id: "A1002"); empty: every earlier call of the tool.
	Same map[string]any
	// Within only counts calls this recent; 0: all of them.
	Within time.Duration
}

// Facts loads customer and run facts on demand: a rule that does not ask
// about the customer costs no query.
type Facts interface {
	Customer(ctx context.Context) (CustomerFacts, error)
	Run(ctx context.Context) (RunFacts, error)
	Total(ctx context.Context, q TotalQuery) (float64, error)
}

// Input is everything a policy decides on.
type Input struct {
	Tool  string
	Risk  tools.Risk
	Args  map[string]any // normalized
	Facts Facts
}

// Policy decides about a call. The YAML file policy implements it; an
// integrator may replace it with plain Go.
type Policy interface {
	Decide(ctx context.Context, in Input) (Decision, error)
	// Version identifies the policy in force (for a file, its SHA-256).
	Version() string
}

// StaticFacts answers with fixed facts; policy tests use it.
type StaticFacts struct {
	C CustomerFacts
	R RunFacts
	T map[string]float64 // totals by name
}

// Total returns the fixed total of that name (0 when not given).
func (f StaticFacts) Total(_ context.Context, q TotalQuery) (float64, error) { return f.T[q.Name], nil }

// Customer returns the fixed customer facts.
func (f StaticFacts) Customer(context.Context) (CustomerFacts, error) { return f.C, nil }

// Run returns the fixed run facts.
func (f StaticFacts) Run(context.Context) (RunFacts, error) { return f.R, nil }

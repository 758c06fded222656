package policy

import (
	"context"
	"fmt"
)

// NotLoadedRule is the rule a call is denied by while the instance could
// not load the policy version in force.
const NotLoadedRule = "policy:not-loaded"

// NotLoaded stands in for a policy version in force that this instance
// could not load (a rule names a tool it does not have, a test fails
// against its tools): it decides no call with an older version. Every call
// is denied, recorded against the version that could not be loaded, and
// the agent is told that nothing was done and why in words a customer may
// hear.
type NotLoaded struct {
	Hash  string // the version in force, as calls record it
	ID    int64
	Cause error
}

// Decide denies the call: nothing runs while the policy in force is not
// loaded.
func (p *NotLoaded) Decide(context.Context, Input) (Decision, error) {
	return Decision{Verdict: Deny, Rule: NotLoadedRule, PolicyVersion: p.Hash,
		Reason: "Nothing was done: this server cannot decide tool calls right now because the policy in force could not be loaded here. " +
			"Tell the customer their request could not be handled at the moment and that staff have been told."}, nil
}

// Version differs from the version's hash, so that once the version loads
// it is put in force as a change.
func (p *NotLoaded) Version() string { return "not-loaded:" + p.Hash }

// Problem says in words why the version is not in force here.
func (p *NotLoaded) Problem() string {
	return fmt.Sprintf("policy version %d (%s) could not be loaded on this instance: %v", p.ID, short(p.Hash), p.Cause)
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

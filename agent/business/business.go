// Package business is what a business brings to Countersign besides a
// tools file and a policy file: its own tables and data, its built-in
// tools and policy, what the approver is shown about a customer, the
// words every run's model is told first, the model it talks with when none
// is chosen, the customers a try-out page signs in as and the staff made
// for a try-out. The command line chooses one value once (--demo chooses
// the demo shop, demo.Shop); nothing else in Countersign knows which.
package business

import (
	"context"

	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Business is one business's parts; every part may be left out.
type Business struct {
	// Name is the business as the log names it ("the demo shop").
	Name string
	// Schema makes the business's own tables beside Countersign's.
	Schema *storage.Schema
	// Seed puts the business's data in the store; run at every start, it
	// adds only what is missing and says how many records it added.
	Seed func(ctx context.Context, store *storage.Store) (int, error)
	// Tools are its built-in tools (before the tools file's).
	Tools func(store *storage.Store) []*tools.Tool
	// Policy is its built-in policy (YAML) when no --policy is given,
	// under PolicyName.
	Policy     []byte
	PolicyName string
	// Facts is what the policy and the approver are told about a
	// customer (the gate's business facts).
	Facts func(store *storage.Store) Facts
	// Prompt is what every run's model is told first when no
	// --system-prompt is given.
	Prompt string
	// Model talks with customers when no --model is given.
	Model llm.Model
	// Customers are those a try-out page (/demo) signs in as, with a
	// secret of the database's own; Staff are the accounts made at start
	// when missing, their passwords printed once.
	Customers []Customer
	Staff     []Person
}

// Facts is what a business knows about its customers.
type Facts interface {
	CustomerFacts(ctx context.Context, customerID string) (map[string]any, error)
}

// Customer is one customer a try-out page offers.
type Customer struct{ ID, Name, About string }

// Person is one staff account a try-out makes.
type Person struct {
	Email, Name string
	Role        models.StaffRole
}

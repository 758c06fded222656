// Package demo is the demo shop as a business like any other (--demo): its
// orders and refunds, its tools and policy, its scripted model (no network),
// its customers and one staff account per role.
package demo

import (
	"context"

	"github.com/countersign/countersign/agent/business"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Shop is the demo shop.
var Shop = business.Business{
	Name:       "the demo shop",
	Schema:     shop.Schema,
	Seed:       func(ctx context.Context, store *storage.Store) (int, error) { return shop.On(store).Seed(ctx) },
	Tools:      func(store *storage.Store) []*tools.Tool { return shop.Tools(store) },
	Policy:     shop.PolicyYAML,
	PolicyName: "(built-in demo shop policy)",
	Facts:      func(store *storage.Store) business.Facts { return shop.Facts{Store: store} },
	Prompt:     shop.SystemPrompt,
	Model:      offline.Model{},
	Customers:  customers(),
	Staff: []business.Person{
		{Email: "ann@demo.countersign", Name: "Ann Approver", Role: models.Approver},
		{Email: "sam@demo.countersign", Name: "Sam Supervisor", Role: models.Supervisor},
		{Email: "audrey@demo.countersign", Name: "Audrey Auditor", Role: models.Auditor},
		{Email: "ada@demo.countersign", Name: "Ada Admin", Role: models.Admin},
	},
}

func customers() []business.Customer {
	var out []business.Customer
	for _, c := range shop.Customers() {
		out = append(out, business.Customer(c))
	}
	return out
}

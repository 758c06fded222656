// Package shop is the demo shop, all of it but its model (demo/offline):
// customers and orders in tables of its own in Countersign's database
// (Schema, Store: written through the store's units of work, with the audit
// chain), the support tools an agent uses on them (every tool acts only on
// the orders of the run's customer), the facts it tells a policy (Facts),
// its policy and prompt, and its customers as /demo offers them
// (Customers). The core reaches it only through what any business gives
// it: tools in a registry, agent/gate.BusinessFacts, a policy, a prompt, a
// config list.
package shop

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// OrderRef names one order.
type OrderRef struct {
	OrderID string `json:"order_id" jsonschema:"description=The order number (for example A1001).,pattern=^[A-Z][0-9]+$,maxLength=12"`
}

// ListOrdersInput has no fields: the customer comes from the run.
type ListOrdersInput struct{}

// AddressInput changes where an order goes.
type AddressInput struct {
	Address string `json:"address" jsonschema:"description=The full new shipping address.,minLength=5,maxLength=300"`
	OrderID string `json:"order_id" jsonschema:"description=The order number (for example A1001).,pattern=^[A-Z][0-9]+$,maxLength=12"`
}

// CancelInput cancels an order.
type CancelInput struct {
	OrderID string `json:"order_id" jsonschema:"description=The order number (for example A1001).,pattern=^[A-Z][0-9]+$,maxLength=12"`
	Reason  string `json:"reason,omitempty" jsonschema:"description=Why the customer wants to cancel.,maxLength=500"`
}

// RefundInput refunds part or all of an order.
type RefundInput struct {
	Amount  float64 `json:"amount" jsonschema:"description=Amount to refund in US dollars.,exclusiveMinimum=0,maximum=5000,multipleOf=0.01"`
	OrderID string  `json:"order_id" jsonschema:"description=The order number (for example A1001).,pattern=^[A-Z][0-9]+$,maxLength=12"`
	Reason  string  `json:"reason,omitempty" jsonschema:"description=Why the refund is given.,maxLength=500"`
}

// OrderView is what the tools tell the model about an order.
type OrderView struct {
	OrderID         string `json:"order_id"`
	Status          string `json:"status"`
	Items           string `json:"items"`
	Total           string `json:"total"`
	Refunded        string `json:"refunded"`
	ShippingAddress string `json:"shipping_address"`
}

func view(o *Order) OrderView {
	return OrderView{OrderID: o.ID, Status: o.Status, Items: o.Items, Total: o.TotalCents.String(),
		Refunded: o.RefundedCents.String(), ShippingAddress: o.ShippingAddress}
}

var errNeedsCustomer = tools.Refuse("this needs a signed-in customer: ask the customer to sign in to the shop first")

// Tools returns the demo shop's tools bound to a store.
func Tools(db *storage.Store) []*tools.Tool {
	sh := shop{st: On(db)}
	return []*tools.Tool{sh.getOrderStatus(), sh.listOrders(), sh.updateShippingAddress(), sh.cancelOrder(), sh.issueRefund()}
}

// shop is the tools' store, and what they share.
type shop struct{ st Store }

func change(call tools.Call, orderID string) Change {
	return Change{CustomerID: call.CustomerID, OrderID: orderID,
		IdempotencyKey: call.IdempotencyKey, Actor: "tool:" + call.ID}
}

// order finds the customer's order for a check, or says why not.
func (sh shop) order(ctx context.Context, call tools.Call, orderID string) (*Order, error) {
	if call.CustomerID == "" {
		return nil, errNeedsCustomer
	}
	o, err := sh.st.CustomerOrder(ctx, call.CustomerID, orderID)
	if errors.Is(err, models.ErrNotFound) {
		return nil, tools.Refuse("order %s was not found for this customer", orderID)
	}
	return o, err
}

// orderFacts tells an approver about the order a call is about.
func (sh shop) orderFacts(ctx context.Context, call tools.Call, orderID string) ([]tools.Fact, error) {
	o, err := sh.order(ctx, call, orderID)
	var refusal *tools.RefusalError
	if errors.As(err, &refusal) {
		return []tools.Fact{{Label: "Order", Value: refusal.Message}}, nil
	}
	if err != nil {
		return nil, err
	}
	return []tools.Fact{
		{Label: "Order", Value: fmt.Sprintf("%s: %s", o.ID, o.Items)},
		{Label: "Status", Value: o.Status},
		{Label: "Total", Value: o.TotalCents.String(), Key: true},
		{Label: "Refunded so far", Value: o.RefundedCents.String(), Key: true},
		{Label: "Left to refund", Value: (o.TotalCents - o.RefundedCents).String(), Key: true},
		{Label: "Ships to", Value: o.ShippingAddress},
	}, nil
}

func needsCustomer(call tools.Call) error {
	if call.CustomerID == "" {
		return errNeedsCustomer
	}
	return nil
}

// getOrderStatus is the get_order_status tool.
func (sh shop) getOrderStatus() *tools.Tool {
	return tools.MustNew(tools.Definition[OrderRef]{
		Name:        "get_order_status",
		Summary:     "Order {order_id}",
		Description: "Look up the status, items, total and shipping address of one of the customer's orders.",
		Risk:        tools.RiskRead,
		Idempotent:  true,
		Check:       func(_ context.Context, call tools.Call, _ OrderRef) error { return needsCustomer(call) },
		Run: func(ctx context.Context, call tools.Call, in OrderRef) (any, error) {
			if call.CustomerID == "" {
				return nil, errNeedsCustomer
			}
			o, err := sh.st.CustomerOrder(ctx, call.CustomerID, in.OrderID)
			if errors.Is(err, models.ErrNotFound) {
				return nil, tools.Refuse("order %s was not found for this customer", in.OrderID)
			}
			if err != nil {
				return nil, err
			}
			return view(o), nil
		},
	})
}

// listOrders is the list_orders tool.
func (sh shop) listOrders() *tools.Tool {
	return tools.MustNew(tools.Definition[ListOrdersInput]{
		Name:        "list_orders",
		Summary:     "The customer's orders",
		Description: "List the customer's orders, newest first.",
		Risk:        tools.RiskRead,
		Idempotent:  true,
		Check:       func(_ context.Context, call tools.Call, _ ListOrdersInput) error { return needsCustomer(call) },
		Run: func(ctx context.Context, call tools.Call, _ ListOrdersInput) (any, error) {
			if call.CustomerID == "" {
				return nil, errNeedsCustomer
			}
			os, err := sh.st.CustomerOrders(ctx, call.CustomerID)
			if err != nil {
				return nil, err
			}
			out := make([]OrderView, len(os))
			for i := range os {
				out[i] = view(&os[i])
			}
			return map[string]any{"orders": out}, nil
		},
	})
}

// updateShippingAddress is the update_shipping_address tool.
func (sh shop) updateShippingAddress() *tools.Tool {
	return tools.MustNew(tools.Definition[AddressInput]{
		Name:        "update_shipping_address",
		Summary:     "New address for order {order_id}: {address}",
		Request:     "your address change for order {order_id}",
		Description: "Change the shipping address of an order that has not shipped yet.",
		Risk:        tools.RiskLowWrite,
		Idempotent:  true,
		Review: func(ctx context.Context, call tools.Call, in AddressInput) ([]tools.Fact, error) {
			return sh.orderFacts(ctx, call, in.OrderID)
		},
		Check: func(ctx context.Context, call tools.Call, in AddressInput) error {
			o, err := sh.order(ctx, call, in.OrderID)
			if err != nil {
				return shopError(err)
			}
			return shopError(o.CanChangeAddress())
		},
		Run: func(ctx context.Context, call tools.Call, in AddressInput) (any, error) {
			if call.CustomerID == "" {
				return nil, errNeedsCustomer
			}
			o, err := sh.st.UpdateShippingAddress(ctx, change(call, in.OrderID), strings.TrimSpace(in.Address))
			if err != nil {
				return nil, shopError(err)
			}
			return view(o), nil
		},
	})
}

// cancelOrder is the cancel_order tool.
func (sh shop) cancelOrder() *tools.Tool {
	return tools.MustNew(tools.Definition[CancelInput]{
		Name:        "cancel_order",
		Summary:     "Cancel order {order_id}",
		Request:     "your request to cancel order {order_id}",
		Description: "Cancel an order that has not shipped yet; what was paid is refunded in full.",
		Risk:        tools.RiskHighWrite,
		Idempotent:  true, // the idempotency key makes a second run a no-op
		Review: func(ctx context.Context, call tools.Call, in CancelInput) ([]tools.Fact, error) {
			return sh.orderFacts(ctx, call, in.OrderID)
		},
		Check: func(ctx context.Context, call tools.Call, in CancelInput) error {
			o, err := sh.order(ctx, call, in.OrderID)
			if err != nil {
				return shopError(err)
			}
			return shopError(o.CanCancel())
		},
		Run: func(ctx context.Context, call tools.Call, in CancelInput) (any, error) {
			if call.CustomerID == "" {
				return nil, errNeedsCustomer
			}
			o, r, err := sh.st.CancelOrder(ctx, change(call, in.OrderID), in.Reason)
			if err != nil {
				return nil, shopError(err)
			}
			out := map[string]any{"order": view(o), "cancelled": true}
			if r != nil {
				out["refunded"] = r.AmountCents.String()
			}
			return out, nil
		},
	})
}

// issueRefund is the issue_refund tool.
func (sh shop) issueRefund() *tools.Tool {
	return tools.MustNew(tools.Definition[RefundInput]{
		Name:        "issue_refund",
		Summary:     "Refund {amount:money} on order {order_id}",
		Request:     "your refund request of {amount:money} on order {order_id}",
		Amount:      "amount",
		Description: "Refund part or all of an order, in US dollars. Never more than is left to refund on that order.",
		Risk:        tools.RiskHighWrite,
		Idempotent:  true, // the idempotency key makes a second run return the first refund
		Review: func(ctx context.Context, call tools.Call, in RefundInput) ([]tools.Fact, error) {
			return sh.orderFacts(ctx, call, in.OrderID)
		},
		Check: func(ctx context.Context, call tools.Call, in RefundInput) error {
			o, err := sh.order(ctx, call, in.OrderID)
			if err != nil {
				return shopError(err)
			}
			return shopError(o.CanRefund(models.CentsOf(in.Amount)))
		},
		Run: func(ctx context.Context, call tools.Call, in RefundInput) (any, error) {
			if call.CustomerID == "" {
				return nil, errNeedsCustomer
			}
			cents := models.CentsOf(in.Amount)
			o, r, err := sh.st.RefundOrder(ctx, change(call, in.OrderID), cents, in.Reason)
			if err != nil {
				return nil, shopError(err)
			}
			return map[string]any{"refund_id": r.ID, "order_id": o.ID, "refunded": r.AmountCents.String(),
				"order_refunded_total": o.RefundedCents.String()}, nil
		},
	})
}

func shopError(err error) error {
	var refusal *tools.RefusalError
	if err == nil || errors.As(err, &refusal) {
		return err
	}
	if errors.Is(err, ErrRefused) {
		return tools.Refuse("%s", strings.TrimPrefix(err.Error(), ErrRefused.Error()+": "))
	}
	return fmt.Errorf("shop: %w", err)
}

// Facts is what the demo shop tells a policy about a customer
// (agent/gate.BusinessFacts): refunded_24h, the dollars its refunds sent the
// customer in the last 24 hours.
type Facts struct{ Store *storage.Store }

// CustomerFacts reads the customer's refunds of the last 24 hours.
func (f Facts) CustomerFacts(ctx context.Context, customerID string) (map[string]any, error) {
	cents, err := On(f.Store).RefundedSince(ctx, customerID, f.Store.Now().Add(-24*time.Hour))
	if err != nil {
		return nil, err
	}
	return map[string]any{"refunded_24h": float64(cents) / 100}, nil
}

// CustomerCard is one of the demo shop's customers with their orders in a
// line, as a page that lets a visitor be them shows it.
type CustomerCard struct {
	ID, Name string
	About    string
}

// Customers lists the demo shop's customers.
func Customers() []CustomerCard {
	var out []CustomerCard
	for _, cu := range customers {
		var theirs []string
		for _, o := range orders {
			if o.CustomerID == cu.ID {
				theirs = append(theirs, fmt.Sprintf("%s: %s, %s, %s", o.ID, o.Items, o.TotalCents.String(), o.Status))
			}
		}
		out = append(out, CustomerCard{ID: cu.ID, Name: cu.Name, About: strings.Join(theirs, " · ")})
	}
	return out
}

// SystemPrompt is what the demo shop's runs tell the model (serve --demo
// without --system-prompt).
const SystemPrompt = `You are a customer support agent for an online shop. Use the tools to look up and change orders; never invent order details.
Some tool calls need a team member's approval: if a tool result says a call was rejected, denied or expired, do not call it again; tell the customer plainly, with the reason.
Be brief and friendly.`

// PolicyYAML is the demo shop's policy: refunds by amount, by order and by
// customer over 24 hours (what `serve --demo` enforces without --policy).
//
//go:embed policy.yaml
var PolicyYAML []byte

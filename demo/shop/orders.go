package shop

import (
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
)

// Customer is one of the shop's customers.
type Customer struct {
	ID, Name, Email string
	CreatedAt       time.Time
}

// Order is an order. Money is kept in cents.
type Order struct {
	ID              string
	CustomerID      string
	Status          string
	TotalCents      models.Cents
	RefundedCents   models.Cents
	ShippingAddress string
	Items           string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Refund is money sent back on an order. The idempotency key makes a retried
// tool execution find the refund it already made instead of paying twice.
type Refund struct {
	ID             string
	OrderID        string
	CustomerID     string
	AmountCents    models.Cents
	Reason         string
	IdempotencyKey string
	CreatedAt      time.Time
}

// Demo-shop order statuses.
const (
	OrderProcessing = "processing"
	OrderShipped    = "shipped"
	OrderDelivered  = "delivered"
	OrderCancelled  = "cancelled"
)

// ErrRefused is wrapped by shop changes the shop's own rules refuse (refund
// more than is left, cancel a shipped order); the message is for the model.
var ErrRefused = errors.New("refused")

// customers and orders are the demo shop (README, "Start it"), seeded
// by Store.Seed.
var (
	customers = []Customer{
		{ID: "cus_alice", Name: "Alice", Email: "alice@example.com"},
		{ID: "cus_bob", Name: "Bob", Email: "bob@example.com"},
	}
	orders = []Order{
		{ID: "A1001", CustomerID: "cus_alice", Status: OrderShipped, TotalCents: 12000, Items: "Trail running shoes", ShippingAddress: "4 Mill Lane, York"},
		{ID: "A1002", CustomerID: "cus_alice", Status: OrderDelivered, TotalCents: 95000, Items: "Espresso machine", ShippingAddress: "4 Mill Lane, York"},
		{ID: "A1003", CustomerID: "cus_alice", Status: OrderProcessing, TotalCents: 6000, Items: "Coffee beans, 3 kg", ShippingAddress: "4 Mill Lane, York"},
		{ID: "B2001", CustomerID: "cus_bob", Status: OrderDelivered, TotalCents: 150000, Items: "Road bike", ShippingAddress: "9 Quay Street, Bristol"},
	}
)

// Change says who is changing the shop and under which idempotency key.
type Change struct {
	CustomerID     string
	OrderID        string
	IdempotencyKey string
	Actor          string
}

// The shop's rules, as pure functions: the tools' read-only checks ask them
// before a call is decided, and the writes ask them again in their
// transaction. Each refusal wraps ErrRefused and is safe to show the model.

// CanChangeAddress says whether the order's address may still change.
func (o *Order) CanChangeAddress() error {
	if o.Status != OrderProcessing {
		return fmt.Errorf("%w: order %s is already %s, so its address can no longer change", ErrRefused, o.ID, o.Status)
	}
	return nil
}

// CanCancel says whether the order may still be cancelled.
func (o *Order) CanCancel() error {
	if o.Status == OrderCancelled {
		return fmt.Errorf("%w: order %s is already cancelled", ErrRefused, o.ID)
	}
	if o.Status != OrderProcessing {
		return fmt.Errorf("%w: order %s has already %s and can no longer be cancelled", ErrRefused, o.ID, pastTense(o.Status))
	}
	return nil
}

// CanRefund says whether amountCents may be refunded on the order: never
// more than is left, never on a cancelled order.
func (o *Order) CanRefund(amountCents models.Cents) error {
	if o.Status == OrderCancelled {
		return fmt.Errorf("%w: order %s was cancelled and has been refunded already", ErrRefused, o.ID)
	}
	if amountCents <= 0 {
		return fmt.Errorf("%w: a refund must be more than $0.00", ErrRefused)
	}
	if left := o.TotalCents - o.RefundedCents; amountCents > left {
		return fmt.Errorf("%w: only %s of order %s is left to refund (asked for %s)", ErrRefused,
			left, o.ID, amountCents)
	}
	return nil
}

func pastTense(status string) string {
	if status == OrderShipped || status == OrderDelivered {
		return "been " + status
	}
	return "become " + status
}

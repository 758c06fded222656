package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

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

// DemoCustomers and DemoOrders are the demo shop (README, "Start it").
var (
	DemoCustomers = []Customer{
		{ID: "cus_alice", Name: "Alice", Email: "alice@example.com"},
		{ID: "cus_bob", Name: "Bob", Email: "bob@example.com"},
	}
	DemoOrders = []Order{
		{ID: "A1001", CustomerID: "cus_alice", Status: OrderShipped, TotalCents: 12000, Items: "Trail running shoes", ShippingAddress: "4 Mill Lane, York"},
		{ID: "A1002", CustomerID: "cus_alice", Status: OrderDelivered, TotalCents: 95000, Items: "Espresso machine", ShippingAddress: "4 Mill Lane, York"},
		{ID: "A1003", CustomerID: "cus_alice", Status: OrderProcessing, TotalCents: 6000, Items: "Coffee beans, 3 kg", ShippingAddress: "4 Mill Lane, York"},
		{ID: "B2001", CustomerID: "cus_bob", Status: OrderDelivered, TotalCents: 150000, Items: "Road bike", ShippingAddress: "9 Quay Street, Bristol"},
	}
)

// errNotDemo: the demo shop's tables are made only in a store opened for
// the demo.
var errNotDemo = errors.New("the database was not opened for the demo shop (serve --demo; models.Options.Demo)")

// SeedDemoShop inserts the demo customers and orders that are missing and
// leaves existing ones alone, so it can run at every start.
func (s *Store) SeedDemoShop(ctx context.Context) (created int, err error) {
	if !s.demo {
		return 0, errNotDemo
	}
	err = s.Write(ctx, func(tx *Tx) error {
		created = 0
		for _, c := range DemoCustomers {
			c.CreatedAt = tx.now
			res := tx.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&c)
			if res.Error != nil {
				return fmt.Errorf("seed customer %s: %w", c.ID, res.Error)
			}
			created += int(res.RowsAffected)
		}
		for _, o := range DemoOrders {
			o.CreatedAt, o.UpdatedAt = tx.now, tx.now
			res := tx.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&o)
			if res.Error != nil {
				return fmt.Errorf("seed order %s: %w", o.ID, res.Error)
			}
			created += int(res.RowsAffected)
		}
		if created == 0 {
			return nil
		}
		return tx.Audit(Event{Actor: "system", Kind: EventShopSeeded, Subject: "demo", Payload: ShopSeededPayload{Records: created}})
	})
	return created, err
}

// CustomerOrder reads an order only if it belongs to the customer, so a tool
// can never reach another customer's order.
func (s *Store) CustomerOrder(ctx context.Context, customerID, orderID string) (*Order, error) {
	row, err := s.readRow(ctx, `SELECT id, customer_id, status, total_cents, refunded_cents, shipping_address, items
		FROM orders WHERE id = ? AND customer_id = ?`, orderID, customerID)
	if err != nil {
		return nil, err
	}
	var o Order
	if err := row.Scan(&o.ID, &o.CustomerID, &o.Status, &o.TotalCents, &o.RefundedCents, &o.ShippingAddress, &o.Items); err != nil {
		return nil, notFound(err)
	}
	return &o, nil
}

// CustomerOrders lists a customer's orders, newest first.
func (s *Store) CustomerOrders(ctx context.Context, customerID string) ([]Order, error) {
	var out []Order
	err := s.db.WithContext(ctx).Where("customer_id = ?", customerID).Order("created_at DESC, id DESC").Find(&out).Error
	return out, err
}

// RefundedSince adds up what a customer was refunded since a moment.
func (s *Store) RefundedSince(ctx context.Context, customerID string, since time.Time) (Cents, error) {
	var total int64
	err := s.db.WithContext(ctx).Model(&Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("customer_id = ? AND created_at > ?", customerID, since.UTC()).Scan(&total).Error
	return Cents(total), err
}

func (tx *Tx) customerOrder(customerID, orderID string) (*Order, error) {
	var o Order
	// Locked (on PostgreSQL) until the unit ends: two refunds of one order
	// on two instances add up instead of one overwriting the other.
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&o, "id = ? AND customer_id = ?", orderID, customerID).Error; err != nil {
		err = notFound(err)
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w: order %s was not found for this customer", ErrRefused, orderID)
		}
		return nil, err
	}
	return &o, nil
}

// ShopChange says who is changing the shop and under which idempotency key.
type ShopChange struct {
	CustomerID     string
	OrderID        string
	IdempotencyKey string
	Actor          string
}

// UpdateShippingAddress changes where an order that has not shipped yet goes.
func (s *Store) UpdateShippingAddress(ctx context.Context, ch ShopChange, address string) (*Order, error) {
	var out *Order
	err := s.Write(ctx, func(tx *Tx) error {
		o, err := tx.customerOrder(ch.CustomerID, ch.OrderID)
		if err != nil {
			return err
		}
		if err := o.CanChangeAddress(); err != nil {
			return err
		}
		if o.ShippingAddress != address {
			if err := tx.db.Model(o).Updates(map[string]any{"shipping_address": address, "updated_at": tx.now}).Error; err != nil {
				return err
			}
			o.ShippingAddress = address
		}
		out = o
		return tx.Audit(Event{Actor: ch.Actor, Kind: EventShopAddressChanged, Subject: o.ID,
			Payload: ShopAddressChangedPayload{Address: address, IdempotencyKey: ch.IdempotencyKey}})
	})
	return out, err
}

// CancelOrder cancels an order that has not shipped and refunds what was paid.
func (s *Store) CancelOrder(ctx context.Context, ch ShopChange, reason string) (*Order, *Refund, error) {
	var order *Order
	var refund *Refund
	err := s.Write(ctx, func(tx *Tx) error {
		o, err := tx.customerOrder(ch.CustomerID, ch.OrderID)
		if err != nil {
			return err
		}
		if o.Status == OrderCancelled {
			order = o
			refund, _ = tx.refundByKey(ch.IdempotencyKey)
			return nil // a retried cancellation is a success, not a second refund
		}
		if err := o.CanCancel(); err != nil {
			return err
		}
		if err := tx.db.Model(o).Updates(map[string]any{"status": OrderCancelled, "updated_at": tx.now}).Error; err != nil {
			return err
		}
		o.Status = OrderCancelled
		if left := o.TotalCents - o.RefundedCents; left > 0 {
			refund, err = tx.refund(o, left, "order cancelled: "+reason, ch.IdempotencyKey)
			if err != nil {
				return err
			}
		}
		order = o
		return tx.Audit(Event{Actor: ch.Actor, Kind: EventShopOrderCancelled, Subject: o.ID,
			Payload: ShopOrderCancelledPayload{Reason: reason, IdempotencyKey: ch.IdempotencyKey}})
	})
	return order, refund, err
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
func (o *Order) CanRefund(amountCents Cents) error {
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

// RefundOrder refunds part or all of an order, never more than is left to
// refund. The same idempotency key returns the refund it made the first time.
func (s *Store) RefundOrder(ctx context.Context, ch ShopChange, amountCents Cents, reason string) (*Order, *Refund, error) {
	var order *Order
	var refund *Refund
	err := s.Write(ctx, func(tx *Tx) error {
		o, err := tx.customerOrder(ch.CustomerID, ch.OrderID)
		if err != nil {
			return err
		}
		if prior, err := tx.refundByKey(ch.IdempotencyKey); err == nil {
			order, refund = o, prior
			return nil
		}
		if err := o.CanRefund(amountCents); err != nil {
			return err
		}
		refund, err = tx.refund(o, amountCents, reason, ch.IdempotencyKey)
		if err != nil {
			return err
		}
		order = o
		return tx.Audit(Event{Actor: ch.Actor, Kind: EventShopRefunded, Subject: o.ID,
			Payload: ShopRefundedPayload{RefundID: refund.ID, AmountCents: amountCents, IdempotencyKey: ch.IdempotencyKey}})
	})
	return order, refund, err
}

func (tx *Tx) refundByKey(key string) (*Refund, error) {
	var r Refund
	if err := tx.db.Take(&r, "idempotency_key = ?", key).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

func (tx *Tx) refund(o *Order, cents Cents, reason, key string) (*Refund, error) {
	res := tx.db.Model(&Order{}).Where("id = ? AND total_cents - refunded_cents >= ?", o.ID, cents).
		Updates(map[string]any{"refunded_cents": o.RefundedCents + cents, "updated_at": tx.now})
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected != 1 {
		return nil, fmt.Errorf("%w: order %s changed while refunding; nothing was refunded", ErrRefused, o.ID)
	}
	o.RefundedCents += cents
	r := &Refund{ID: NewID("ref"), OrderID: o.ID, CustomerID: o.CustomerID, AmountCents: cents,
		Reason: reason, IdempotencyKey: key, CreatedAt: tx.now}
	if err := tx.db.Create(r).Error; err != nil {
		return nil, fmt.Errorf("record refund: %w", err)
	}
	return r, nil
}

// OrderRefunds lists the refunds of an order, oldest first.
func (s *Store) OrderRefunds(ctx context.Context, orderID string) ([]Refund, error) {
	var out []Refund
	err := s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&out).Error
	return out, err
}

// AddOrders inserts orders (and nothing else); benchmarks and imports use it.
func (s *Store) AddOrders(ctx context.Context, orders []Order) error {
	if !s.demo {
		return errNotDemo
	}
	return s.Write(ctx, func(tx *Tx) error {
		for i := range orders {
			o := orders[i]
			o.CreatedAt, o.UpdatedAt = tx.now, tx.now
			if err := tx.db.Create(&o).Error; err != nil {
				return fmt.Errorf("add order %s: %w", o.ID, err)
			}
		}
		return tx.Audit(Event{Actor: "system", Kind: EventShopOrdersAdded, Subject: "orders", Payload: ShopOrdersAddedPayload{Count: len(orders)}})
	})
}

package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm/clause"
)

// errNotDemo: the demo shop's tables are made only in a store opened for
// the demo.
var errNotDemo = errors.New("the database was not opened for the demo shop (serve --demo; storage.Options.Demo)")

// SeedDemoShop inserts the demo customers and orders that are missing and
// leaves existing ones alone, so it can run at every start.
func (s *Store) SeedDemoShop(ctx context.Context) (created int, err error) {
	if !s.demo {
		return 0, errNotDemo
	}
	err = s.Write(ctx, func(tx *Tx) error {
		created = 0
		for _, c := range models.DemoCustomers {
			c.CreatedAt = tx.now
			res := tx.db.Clauses(clause.OnConflict{DoNothing: true}).Create(&c)
			if res.Error != nil {
				return fmt.Errorf("seed customer %s: %w", c.ID, res.Error)
			}
			created += int(res.RowsAffected)
		}
		for _, o := range models.DemoOrders {
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
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventShopSeeded, Subject: "demo", Payload: models.ShopSeededPayload{Records: created}})
	})
	return created, err
}

// CustomerOrder reads an order only if it belongs to the customer, so a tool
// can never reach another customer's order.
func (s *Store) CustomerOrder(ctx context.Context, customerID, orderID string) (*models.Order, error) {
	row, err := s.readRow(ctx, `SELECT id, customer_id, status, total_cents, refunded_cents, shipping_address, items
		FROM orders WHERE id = ? AND customer_id = ?`, orderID, customerID)
	if err != nil {
		return nil, err
	}
	var o models.Order
	if err := row.Scan(&o.ID, &o.CustomerID, &o.Status, &o.TotalCents, &o.RefundedCents, &o.ShippingAddress, &o.Items); err != nil {
		return nil, notFound(err)
	}
	return &o, nil
}

// CustomerOrders lists a customer's orders, newest first.
func (s *Store) CustomerOrders(ctx context.Context, customerID string) ([]models.Order, error) {
	var out []models.Order
	err := s.db.WithContext(ctx).Where("customer_id = ?", customerID).Order("created_at DESC, id DESC").Find(&out).Error
	return out, err
}

// RefundedSince adds up what a customer was refunded since a moment.
func (s *Store) RefundedSince(ctx context.Context, customerID string, since time.Time) (models.Cents, error) {
	var total int64
	err := s.db.WithContext(ctx).Model(&models.Refund{}).Select("COALESCE(SUM(amount_cents), 0)").
		Where("customer_id = ? AND created_at > ?", customerID, since.UTC()).Scan(&total).Error
	return models.Cents(total), err
}

func (tx *Tx) customerOrder(customerID, orderID string) (*models.Order, error) {
	var o models.Order
	// Locked (on PostgreSQL) until the unit ends: two refunds of one order
	// on two instances add up instead of one overwriting the other.
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&o, "id = ? AND customer_id = ?", orderID, customerID).Error; err != nil {
		err = notFound(err)
		if errors.Is(err, models.ErrNotFound) {
			return nil, fmt.Errorf("%w: order %s was not found for this customer", models.ErrRefused, orderID)
		}
		return nil, err
	}
	return &o, nil
}

// UpdateShippingAddress changes where an order that has not shipped yet goes.
func (s *Store) UpdateShippingAddress(ctx context.Context, ch models.ShopChange, address string) (*models.Order, error) {
	var out *models.Order
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
		return tx.Audit(models.Event{Actor: ch.Actor, Kind: models.EventShopAddressChanged, Subject: o.ID,
			Payload: models.ShopAddressChangedPayload{Address: address, IdempotencyKey: ch.IdempotencyKey}})
	})
	return out, err
}

// CancelOrder cancels an order that has not shipped and refunds what was paid.
func (s *Store) CancelOrder(ctx context.Context, ch models.ShopChange, reason string) (*models.Order, *models.Refund, error) {
	var order *models.Order
	var refund *models.Refund
	err := s.Write(ctx, func(tx *Tx) error {
		o, err := tx.customerOrder(ch.CustomerID, ch.OrderID)
		if err != nil {
			return err
		}
		if o.Status == models.OrderCancelled {
			order = o
			refund, _ = tx.refundByKey(ch.IdempotencyKey)
			return nil // a retried cancellation is a success, not a second refund
		}
		if err := o.CanCancel(); err != nil {
			return err
		}
		if err := tx.db.Model(o).Updates(map[string]any{"status": models.OrderCancelled, "updated_at": tx.now}).Error; err != nil {
			return err
		}
		o.Status = models.OrderCancelled
		if left := o.TotalCents - o.RefundedCents; left > 0 {
			refund, err = tx.refund(o, left, "order cancelled: "+reason, ch.IdempotencyKey)
			if err != nil {
				return err
			}
		}
		order = o
		return tx.Audit(models.Event{Actor: ch.Actor, Kind: models.EventShopOrderCancelled, Subject: o.ID,
			Payload: models.ShopOrderCancelledPayload{Reason: reason, IdempotencyKey: ch.IdempotencyKey}})
	})
	return order, refund, err
}

// RefundOrder refunds part or all of an order, never more than is left to
// refund. The same idempotency key returns the refund it made the first time.
func (s *Store) RefundOrder(ctx context.Context, ch models.ShopChange, amountCents models.Cents, reason string) (*models.Order, *models.Refund, error) {
	var order *models.Order
	var refund *models.Refund
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
		return tx.Audit(models.Event{Actor: ch.Actor, Kind: models.EventShopRefunded, Subject: o.ID,
			Payload: models.ShopRefundedPayload{RefundID: refund.ID, AmountCents: amountCents, IdempotencyKey: ch.IdempotencyKey}})
	})
	return order, refund, err
}

func (tx *Tx) refundByKey(key string) (*models.Refund, error) {
	var r models.Refund
	if err := tx.db.Take(&r, "idempotency_key = ?", key).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

func (tx *Tx) refund(o *models.Order, cents models.Cents, reason, key string) (*models.Refund, error) {
	res := tx.db.Model(&models.Order{}).Where("id = ? AND total_cents - refunded_cents >= ?", o.ID, cents).
		Updates(map[string]any{"refunded_cents": o.RefundedCents + cents, "updated_at": tx.now})
	if res.Error != nil {
		return nil, res.Error
	}
	if res.RowsAffected != 1 {
		return nil, fmt.Errorf("%w: order %s changed while refunding; nothing was refunded", models.ErrRefused, o.ID)
	}
	o.RefundedCents += cents
	r := &models.Refund{ID: models.NewID("ref"), OrderID: o.ID, CustomerID: o.CustomerID, AmountCents: cents,
		Reason: reason, IdempotencyKey: key, CreatedAt: tx.now}
	if err := tx.db.Create(r).Error; err != nil {
		return nil, fmt.Errorf("record refund: %w", err)
	}
	return r, nil
}

// OrderRefunds lists the refunds of an order, oldest first.
func (s *Store) OrderRefunds(ctx context.Context, orderID string) ([]models.Refund, error) {
	var out []models.Refund
	err := s.db.WithContext(ctx).Where("order_id = ?", orderID).Order("created_at, id").Find(&out).Error
	return out, err
}

// AddOrders inserts orders (and nothing else); benchmarks and imports use it.
func (s *Store) AddOrders(ctx context.Context, orders []models.Order) error {
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
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventShopOrdersAdded, Subject: "orders", Payload: models.ShopOrdersAddedPayload{Count: len(orders)}})
	})
}

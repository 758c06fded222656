package shop

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// Schema is the shop's tables (migrations/), made in a database opened
// with it (storage.Options.Own; `serve --demo`) and in no other. Their
// versions are kept in goose_demo_version, as they always were.
var Schema = func() *storage.Schema {
	lite, _ := fs.Sub(migrationFiles, "migrations/sqlite")
	pg, _ := fs.Sub(migrationFiles, "migrations/postgres")
	return &storage.Schema{Name: "demo", SQLite: lite, Postgres: pg}
}()

// errNotDemo: the shop's tables are made only in a store opened for it.
var errNotDemo = errors.New("the database was not opened for the demo shop (serve --demo; storage.Options.Own = shop.Schema)")

// Store is the shop's orders and refunds, in Countersign's database.
type Store struct{ DB *storage.Store }

const orderColumns = `id, customer_id, status, total_cents, refunded_cents, shipping_address, items, created_at, updated_at`

func scanOrder(row interface{ Scan(...any) error }) (*Order, error) {
	var o Order
	err := row.Scan(&o.ID, &o.CustomerID, &o.Status, &o.TotalCents, &o.RefundedCents, &o.ShippingAddress, &o.Items, &o.CreatedAt, &o.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, models.ErrNotFound
	}
	return &o, err
}

// Seed inserts the demo customers and orders that are missing and leaves
// existing ones alone, so it can run at every start.
func (s Store) Seed(ctx context.Context) (created int, err error) {
	if !s.DB.Has(Schema.Name) {
		return 0, errNotDemo
	}
	err = s.DB.Write(ctx, func(tx *storage.Tx) error {
		created = 0
		for _, c := range customers {
			n, err := tx.Exec(`INSERT INTO customers (id, name, email, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				c.ID, c.Name, c.Email, tx.Now())
			if err != nil {
				return fmt.Errorf("seed customer %s: %w", c.ID, err)
			}
			created += int(n)
		}
		for _, o := range orders {
			n, err := insertOrder(tx, o, true)
			if err != nil {
				return fmt.Errorf("seed order %s: %w", o.ID, err)
			}
			created += int(n)
		}
		if created == 0 {
			return nil
		}
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventShopSeeded, Subject: "demo", Payload: models.ShopSeededPayload{Records: created}})
	})
	return created, err
}

func insertOrder(tx *storage.Tx, o Order, skipExisting bool) (int64, error) {
	q := `INSERT INTO orders (` + orderColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if skipExisting {
		q += ` ON CONFLICT DO NOTHING`
	}
	return tx.Exec(q, o.ID, o.CustomerID, o.Status, int64(o.TotalCents), int64(o.RefundedCents), o.ShippingAddress, o.Items, tx.Now(), tx.Now())
}

// AddOrders inserts orders (and nothing else); benchmarks and imports use it.
func (s Store) AddOrders(ctx context.Context, list []Order) error {
	if !s.DB.Has(Schema.Name) {
		return errNotDemo
	}
	return s.DB.Write(ctx, func(tx *storage.Tx) error {
		for _, o := range list {
			if _, err := insertOrder(tx, o, false); err != nil {
				return fmt.Errorf("add order %s: %w", o.ID, err)
			}
		}
		return tx.Audit(models.Event{Actor: "system", Kind: models.EventShopOrdersAdded, Subject: "orders", Payload: models.ShopOrdersAddedPayload{Count: len(list)}})
	})
}

// CustomerOrder reads an order only if it belongs to the customer, so a tool
// can never reach another customer's order.
func (s Store) CustomerOrder(ctx context.Context, customerID, orderID string) (*Order, error) {
	row, err := s.DB.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = ? AND customer_id = ?`, orderID, customerID)
	if err != nil {
		return nil, err
	}
	return scanOrder(row)
}

// CustomerOrders lists a customer's orders, newest first.
func (s Store) CustomerOrders(ctx context.Context, customerID string) ([]Order, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+orderColumns+` FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC`, customerID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Order
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *o)
	}
	return out, rows.Err()
}

// RefundedSince adds up what a customer was refunded since a moment.
func (s Store) RefundedSince(ctx context.Context, customerID string, since time.Time) (models.Cents, error) {
	var total int64
	row, err := s.DB.QueryRow(ctx, `SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE customer_id = ? AND created_at > ?`,
		customerID, since.UTC())
	if err == nil {
		err = row.Scan(&total)
	}
	return models.Cents(total), err
}

// OrderRefunds lists the refunds of an order, oldest first.
func (s Store) OrderRefunds(ctx context.Context, orderID string) ([]Refund, error) {
	rows, err := s.DB.Query(ctx, `SELECT id, order_id, customer_id, amount_cents, reason, idempotency_key, created_at
		FROM refunds WHERE order_id = ? ORDER BY created_at, id`, orderID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Refund
	for rows.Next() {
		var r Refund
		if err := rows.Scan(&r.ID, &r.OrderID, &r.CustomerID, &r.AmountCents, &r.Reason, &r.IdempotencyKey, &r.CreatedAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// customerOrder reads the order in a unit of work, the only one changing
// it until the unit ends: two refunds of one order on two instances add up
// instead of one overwriting the other.
func customerOrder(tx *storage.Tx, customerID, orderID string) (*Order, error) {
	if err := tx.Serialize("demo-order:" + orderID); err != nil {
		return nil, err
	}
	o, err := scanOrder(tx.QueryRow(`SELECT `+orderColumns+` FROM orders WHERE id = ? AND customer_id = ?`, orderID, customerID))
	if errors.Is(err, models.ErrNotFound) {
		return nil, fmt.Errorf("%w: order %s was not found for this customer", ErrRefused, orderID)
	}
	return o, err
}

// UpdateShippingAddress changes where an order that has not shipped yet goes.
func (s Store) UpdateShippingAddress(ctx context.Context, ch Change, address string) (*Order, error) {
	var out *Order
	err := s.DB.Write(ctx, func(tx *storage.Tx) error {
		o, err := customerOrder(tx, ch.CustomerID, ch.OrderID)
		if err != nil {
			return err
		}
		if err := o.CanChangeAddress(); err != nil {
			return err
		}
		if o.ShippingAddress != address {
			if _, err := tx.Exec(`UPDATE orders SET shipping_address = ?, updated_at = ? WHERE id = ?`, address, tx.Now(), o.ID); err != nil {
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
func (s Store) CancelOrder(ctx context.Context, ch Change, reason string) (*Order, *Refund, error) {
	var order *Order
	var refund *Refund
	err := s.DB.Write(ctx, func(tx *storage.Tx) error {
		o, err := customerOrder(tx, ch.CustomerID, ch.OrderID)
		if err != nil {
			return err
		}
		if o.Status == OrderCancelled {
			order = o
			refund, _ = refundByKey(tx, ch.IdempotencyKey)
			return nil // a retried cancellation is a success, not a second refund
		}
		if err := o.CanCancel(); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE orders SET status = ?, updated_at = ? WHERE id = ?`, OrderCancelled, tx.Now(), o.ID); err != nil {
			return err
		}
		o.Status = OrderCancelled
		if left := o.TotalCents - o.RefundedCents; left > 0 {
			refund, err = addRefund(tx, o, left, "order cancelled: "+reason, ch.IdempotencyKey)
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
func (s Store) RefundOrder(ctx context.Context, ch Change, amountCents models.Cents, reason string) (*Order, *Refund, error) {
	var order *Order
	var refund *Refund
	err := s.DB.Write(ctx, func(tx *storage.Tx) error {
		o, err := customerOrder(tx, ch.CustomerID, ch.OrderID)
		if err != nil {
			return err
		}
		if prior, err := refundByKey(tx, ch.IdempotencyKey); err == nil {
			order, refund = o, prior
			return nil
		}
		if err := o.CanRefund(amountCents); err != nil {
			return err
		}
		refund, err = addRefund(tx, o, amountCents, reason, ch.IdempotencyKey)
		if err != nil {
			return err
		}
		order = o
		return tx.Audit(models.Event{Actor: ch.Actor, Kind: models.EventShopRefunded, Subject: o.ID,
			Payload: models.ShopRefundedPayload{RefundID: refund.ID, AmountCents: amountCents, IdempotencyKey: ch.IdempotencyKey}})
	})
	return order, refund, err
}

func refundByKey(tx *storage.Tx, key string) (*Refund, error) {
	var r Refund
	err := tx.QueryRow(`SELECT id, order_id, customer_id, amount_cents, reason, idempotency_key, created_at FROM refunds WHERE idempotency_key = ?`, key).
		Scan(&r.ID, &r.OrderID, &r.CustomerID, &r.AmountCents, &r.Reason, &r.IdempotencyKey, &r.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, models.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func addRefund(tx *storage.Tx, o *Order, cents models.Cents, reason, key string) (*Refund, error) {
	n, err := tx.Exec(`UPDATE orders SET refunded_cents = ?, updated_at = ? WHERE id = ? AND total_cents - refunded_cents >= ?`,
		int64(o.RefundedCents+cents), tx.Now(), o.ID, int64(cents))
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: order %s changed while refunding; nothing was refunded", ErrRefused, o.ID)
	}
	o.RefundedCents += cents
	r := &Refund{ID: models.NewID("ref"), OrderID: o.ID, CustomerID: o.CustomerID, AmountCents: cents,
		Reason: reason, IdempotencyKey: key, CreatedAt: tx.Now()}
	if _, err := tx.Exec(`INSERT INTO refunds (id, order_id, customer_id, amount_cents, reason, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.OrderID, r.CustomerID, int64(r.AmountCents), r.Reason, r.IdempotencyKey, r.CreatedAt); err != nil {
		return nil, fmt.Errorf("record refund: %w", err)
	}
	return r, nil
}

// On is the shop in a store opened with Schema.
func On(db *storage.Store) Store { return Store{DB: db} }

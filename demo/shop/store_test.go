package shop_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// Seeding twice makes the shop once, and a customer reaches only their own
// orders.
func TestSeedIsIdempotent(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	n, err := shop.On(s).Seed(ctx)
	if err != nil || n != 6 {
		t.Fatalf("first seed created %d: %v", n, err)
	}
	if n, err := shop.On(s).Seed(ctx); err != nil || n != 0 {
		t.Fatalf("second seed created %d: %v", n, err)
	}
	o, err := shop.On(s).CustomerOrder(ctx, "cus_bob", "B2001")
	if err != nil || o.TotalCents != 150000 || o.Status != shop.OrderDelivered || o.Items != "Road bike" {
		t.Fatalf("B2001: %+v %v", o, err)
	}
	if _, err := shop.On(s).CustomerOrder(ctx, "cus_bob", "A1001"); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("Bob reached Alice's order: %v", err)
	}
	orders, err := shop.On(s).CustomerOrders(ctx, "cus_alice")
	if err != nil || len(orders) != 3 {
		t.Fatalf("Alice's orders: %+v %v", orders, err)
	}
}

// A database opened without the shop's schema has none of its tables, and
// the shop says so rather than write there.
func TestTheShopSeedsOnlyItsOwnTables(t *testing.T) {
	s, err := storage.Open(filepath.Join(t.TempDir(), "plain.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := shop.On(s).Seed(context.Background()); err == nil || !strings.Contains(err.Error(), "not opened for the demo") {
		t.Fatalf("seeding a database made without --demo: %v", err)
	}
}

// open is a store for the test with the shop's own tables.
func open(t *testing.T) *storage.Store {
	t.Helper()
	s, _ := storetest.OpenWith(t, storage.Options{Own: shop.Schema})
	return s
}

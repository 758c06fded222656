-- The demo shop's tables: made only in a database that `serve --demo` sets
-- up (shop.Schema), never in one made without it. IF NOT EXISTS: a
-- database made before the shop had migrations of its own has them.

-- +goose Up
CREATE TABLE IF NOT EXISTS customers (
    id varchar(64) PRIMARY KEY,
    name varchar(200),
    email varchar(200),
    created_at timestamptz
);
CREATE TABLE IF NOT EXISTS orders (
    id varchar(32) PRIMARY KEY,
    customer_id varchar(64) NOT NULL REFERENCES customers (id) ON DELETE RESTRICT,
    status varchar(16),
    total_cents bigint,
    refunded_cents bigint,
    shipping_address varchar(300),
    items varchar(500),
    created_at timestamptz,
    updated_at timestamptz
);
CREATE INDEX IF NOT EXISTS idx_orders_customer_id ON orders (customer_id);
CREATE TABLE IF NOT EXISTS refunds (
    id varchar(40) PRIMARY KEY,
    order_id varchar(32) NOT NULL REFERENCES orders (id) ON DELETE RESTRICT,
    customer_id varchar(64),
    amount_cents bigint,
    reason varchar(500),
    idempotency_key varchar(80),
    created_at timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS idx_refunds_idempotency_key ON refunds (idempotency_key);
CREATE INDEX IF NOT EXISTS idx_refunds_customer_created ON refunds (customer_id, created_at);
CREATE INDEX IF NOT EXISTS idx_refunds_order_id ON refunds (order_id);

-- +goose Down
DROP TABLE IF EXISTS refunds;
DROP TABLE IF EXISTS orders;
DROP TABLE IF EXISTS customers;

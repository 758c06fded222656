-- The demo shop's tables: made only in a database that `serve --demo` sets
-- up (shop.Schema), never in one made without it. IF NOT EXISTS: a
-- database made before the shop had migrations of its own has them.

-- +goose Up
CREATE TABLE IF NOT EXISTS `customers` (`id` text,`name` text,`email` text,`created_at` datetime,PRIMARY KEY (`id`));
CREATE TABLE IF NOT EXISTS `orders` (`id` text,`customer_id` text NOT NULL,`status` text,`total_cents` integer,`refunded_cents` integer,`shipping_address` text,`items` text,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`),CONSTRAINT `fk_orders_customer` FOREIGN KEY (`customer_id`) REFERENCES `customers`(`id`) ON DELETE RESTRICT);
CREATE INDEX IF NOT EXISTS `idx_orders_customer_id` ON `orders`(`customer_id`);
CREATE TABLE IF NOT EXISTS `refunds` (`id` text,`order_id` text NOT NULL,`customer_id` text,`amount_cents` integer,`reason` text,`idempotency_key` text,`created_at` datetime,PRIMARY KEY (`id`),CONSTRAINT `fk_refunds_order` FOREIGN KEY (`order_id`) REFERENCES `orders`(`id`) ON DELETE RESTRICT);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_refunds_idempotency_key` ON `refunds`(`idempotency_key`);
CREATE INDEX IF NOT EXISTS `idx_refunds_customer_created` ON `refunds`(`customer_id`,`created_at`);
CREATE INDEX IF NOT EXISTS `idx_refunds_order_id` ON `refunds`(`order_id`);

-- +goose Down
DROP TABLE IF EXISTS `refunds`;
DROP TABLE IF EXISTS `orders`;
DROP TABLE IF EXISTS `customers`;

-- Grants count money in whole cents: the float dollars they summed (with a
-- slack for rounding) become integers, rounded once here.

-- +goose Up
ALTER TABLE grants ADD COLUMN max_cents bigint NOT NULL DEFAULT 0, ADD COLUMN used_cents bigint NOT NULL DEFAULT 0;
UPDATE grants SET max_cents = ROUND(max_amount::numeric * 100), used_cents = ROUND(used_amount::numeric * 100);
ALTER TABLE grants DROP COLUMN max_amount, DROP COLUMN used_amount;

-- +goose Down
ALTER TABLE grants ADD COLUMN max_amount double precision, ADD COLUMN used_amount double precision;
UPDATE grants SET max_amount = max_cents / 100.0, used_amount = used_cents / 100.0;
ALTER TABLE grants DROP COLUMN max_cents, DROP COLUMN used_cents;

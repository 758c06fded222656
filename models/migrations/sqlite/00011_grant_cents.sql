-- Grants count money in whole cents: the float dollars they summed (with a
-- slack for rounding) become integers, rounded once here.

-- +goose Up
ALTER TABLE `grants` ADD COLUMN `max_cents` integer NOT NULL DEFAULT 0;
ALTER TABLE `grants` ADD COLUMN `used_cents` integer NOT NULL DEFAULT 0;
UPDATE `grants` SET `max_cents` = CAST(ROUND(`max_amount` * 100) AS INTEGER), `used_cents` = CAST(ROUND(`used_amount` * 100) AS INTEGER);
ALTER TABLE `grants` DROP COLUMN `max_amount`;
ALTER TABLE `grants` DROP COLUMN `used_amount`;

-- +goose Down
ALTER TABLE `grants` ADD COLUMN `max_amount` real;
ALTER TABLE `grants` ADD COLUMN `used_amount` real;
UPDATE `grants` SET `max_amount` = `max_cents` / 100.0, `used_amount` = `used_cents` / 100.0;
ALTER TABLE `grants` DROP COLUMN `max_cents`;
ALTER TABLE `grants` DROP COLUMN `used_cents`;

-- The audit log becomes several chains (ARCHITECTURE.md, "Several audit
-- chains"): each event names its chain and each chain has a head of its
-- own. SQLite is one instance, so one chain: its events stay keyed by seq
-- (the rowid, the cheapest key to append to) and the table is not copied.
-- What was written before is chain 0, its events and hashes unchanged. A
-- call remembers the chain its events go to.

-- +goose Up
ALTER TABLE `audit_events` ADD COLUMN `chain` integer NOT NULL DEFAULT 0;
ALTER TABLE `audit_heads` RENAME COLUMN `id` TO `chain`;
UPDATE `audit_heads` SET `chain` = 0 WHERE `chain` = 1;
ALTER TABLE `tool_calls` ADD COLUMN `chain` integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE `tool_calls` DROP COLUMN `chain`;
UPDATE `audit_heads` SET `chain` = 1 WHERE `chain` = 0;
ALTER TABLE `audit_heads` RENAME COLUMN `chain` TO `id`;
ALTER TABLE `audit_events` DROP COLUMN `chain`;

-- The audit log becomes several chains (ARCHITECTURE.md, "Several audit
-- chains"): each event names its chain, (chain, seq) is the key, and each
-- chain has a head of its own. What was written before is chain 0, its
-- events and hashes unchanged. A call remembers the chain its events go to.

-- +goose Up
CREATE TABLE `audit_events_chained` (`chain` integer,`seq` integer,`at` datetime,`actor` text,`kind` text,`subject` text,`payload` text,`prev_hash` text,`hash` text,PRIMARY KEY (`chain`,`seq`));
INSERT INTO `audit_events_chained` (`chain`, `seq`, `at`, `actor`, `kind`, `subject`, `payload`, `prev_hash`, `hash`)
    SELECT 0, `seq`, `at`, `actor`, `kind`, `subject`, `payload`, `prev_hash`, `hash` FROM `audit_events` ORDER BY `seq`;
DROP TABLE `audit_events`;
ALTER TABLE `audit_events_chained` RENAME TO `audit_events`;
CREATE INDEX `idx_audit_events_subject` ON `audit_events`(`subject`);
ALTER TABLE `audit_heads` RENAME COLUMN `id` TO `chain`;
UPDATE `audit_heads` SET `chain` = 0 WHERE `chain` = 1;
ALTER TABLE `tool_calls` ADD COLUMN `chain` integer NOT NULL DEFAULT 0;

-- +goose Down
-- Only a database with one chain goes back: with more, seq alone is not a
-- key and the step fails.
ALTER TABLE `tool_calls` DROP COLUMN `chain`;
UPDATE `audit_heads` SET `chain` = 1 WHERE `chain` = 0;
ALTER TABLE `audit_heads` RENAME COLUMN `chain` TO `id`;
CREATE TABLE `audit_events_single` (`seq` integer,`at` datetime,`actor` text,`kind` text,`subject` text,`payload` text,`prev_hash` text,`hash` text,PRIMARY KEY (`seq`));
INSERT INTO `audit_events_single` SELECT `seq`, `at`, `actor`, `kind`, `subject`, `payload`, `prev_hash`, `hash` FROM `audit_events`;
DROP TABLE `audit_events`;
ALTER TABLE `audit_events_single` RENAME TO `audit_events`;
CREATE INDEX `idx_audit_events_subject` ON `audit_events`(`subject`);

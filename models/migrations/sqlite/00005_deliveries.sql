-- Reaching people outside: deliveries (webhooks, Slack, email) stored with
-- the change they tell of; a staff account's Slack user; when a pending
-- action was marked overdue and when its approvers were reminded.

-- +goose Up
CREATE TABLE `deliveries` (`id` integer PRIMARY KEY AUTOINCREMENT,`channel` text,`target` text,`event` text,`subject` text,`body` text,`status` text,`attempts` integer,`next_at` datetime,`claimed_by` text DEFAULT "",`claimed_until` datetime,`last_error` text,`ref` text DEFAULT "",`created_at` datetime,`delivered_at` datetime);
CREATE INDEX `idx_deliveries_created_at` ON `deliveries`(`created_at`);
CREATE INDEX `idx_deliveries_due` ON `deliveries`(`status`,`next_at`);
CREATE INDEX `idx_deliveries_subject` ON `deliveries`(`subject`);
ALTER TABLE `staffs` ADD COLUMN `slack_user_id` text DEFAULT "";
ALTER TABLE `tool_calls` ADD COLUMN `overdue_at` datetime;
ALTER TABLE `tool_calls` ADD COLUMN `reminded_at` datetime;

-- +goose Down
ALTER TABLE `tool_calls` DROP COLUMN `reminded_at`;
ALTER TABLE `tool_calls` DROP COLUMN `overdue_at`;
ALTER TABLE `staffs` DROP COLUMN `slack_user_id`;
DROP TABLE `deliveries`;

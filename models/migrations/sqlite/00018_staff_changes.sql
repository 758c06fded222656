-- Who may sign is countersigned: staff changes proposed by one admin and
-- approved by others, their signatures, one-time enrollment links, and how
-- each account came to be.

-- +goose Up
ALTER TABLE `staffs` ADD COLUMN `origin` text DEFAULT "";
ALTER TABLE `staffs` ADD COLUMN `told_at` datetime;
ALTER TABLE `staffs` ADD COLUMN `sso_subject` text DEFAULT "";
CREATE TABLE `staff_changes` (`id` text,`kind` text,`staff_id` text,`email` text,`name` text,`role` text,`status` text,`proposed_by` text,`proposer_name` text,`people_needed` integer,`reason` text,`ended_by` text,`created_at` datetime,`ended_at` datetime,`mapping` text DEFAULT "",PRIMARY KEY (`id`));
CREATE INDEX `idx_staff_changes_email` ON `staff_changes`(`email`);
CREATE INDEX `idx_staff_changes_staff_id` ON `staff_changes`(`staff_id`);
CREATE INDEX `idx_staff_changes_status` ON `staff_changes`(`status`);
CREATE TABLE `staff_change_signatures` (`id` integer PRIMARY KEY AUTOINCREMENT,`change_id` text NOT NULL,`staff_id` text,`staff_name` text,`created_at` datetime,`passkey` text DEFAULT "");
CREATE UNIQUE INDEX `idx_staff_change_signatures_once` ON `staff_change_signatures`(`change_id`,`staff_id`);
CREATE TABLE `enrollments` (`id` text,`staff_id` text NOT NULL,`token_hash` text,`purpose` text,`change_id` text,`created_by` text,`created_at` datetime,`expires_at` datetime,`used_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_enrollments_staff_id` ON `enrollments`(`staff_id`);
CREATE UNIQUE INDEX `idx_enrollments_token_hash` ON `enrollments`(`token_hash`);

ALTER TABLE `approvals` ADD COLUMN `passkey` text DEFAULT "";
ALTER TABLE `policy_signatures` ADD COLUMN `passkey` text DEFAULT "";
CREATE TABLE `passkeys` (`id` text,`staff_id` text NOT NULL,`name` text,`rp_id` text,`credential` text,`created_at` datetime,`last_used_at` datetime,`removed_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_passkeys_staff_id` ON `passkeys`(`staff_id`);
-- +goose Down
DROP TABLE `passkeys`;
ALTER TABLE `approvals` DROP COLUMN `passkey`;
ALTER TABLE `policy_signatures` DROP COLUMN `passkey`;
DROP TABLE `enrollments`;
DROP TABLE `staff_change_signatures`;
DROP TABLE `staff_changes`;
ALTER TABLE `staffs` DROP COLUMN `origin`;
ALTER TABLE `staffs` DROP COLUMN `told_at`;
ALTER TABLE `staffs` DROP COLUMN `sso_subject`;

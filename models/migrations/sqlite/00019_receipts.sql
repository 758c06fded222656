-- Proof of what ran: what each approval was given under (the tool's
-- definition, the policy), signed receipts of final calls, and the keys
-- that sign them.

-- +goose Up
ALTER TABLE `approvals` ADD COLUMN `tool_hash` text DEFAULT "";
ALTER TABLE `approvals` ADD COLUMN `policy_version` text DEFAULT "";
CREATE TABLE `receipts` (`call_id` text,`key_id` text,`jws` text,`created_at` datetime,PRIMARY KEY (`call_id`));
CREATE TABLE `receipt_keys` (`id` text,`public` text,`private` text DEFAULT "",`created_at` datetime,PRIMARY KEY (`id`));
-- +goose Down
DROP TABLE `receipt_keys`;
DROP TABLE `receipts`;
ALTER TABLE `approvals` DROP COLUMN `policy_version`;
ALTER TABLE `approvals` DROP COLUMN `tool_hash`;

-- Policy versions in the database: every version proposed, with its tests
-- and its replay; the one in force for every instance; the admins who
-- countersigned each. Instances say when they could not load the version
-- in force. Insights read decisions by tool and rule, and approvals by
-- time, from indexes of their own.

-- +goose Up
CREATE TABLE `policy_versions` (`id` integer PRIMARY KEY AUTOINCREMENT,`hash` text,`yaml` text,`note` text,`source` text,`author_id` text,`author_name` text,`tools_version` text,`tests` text,`replay` text,`replay_digest` text,`base_id` integer,`people_needed` integer,`status` text,`created_at` datetime,`in_force_at` datetime,`ended_at` datetime,`ended_by` text,`reason` text);
CREATE INDEX `idx_policy_versions_hash` ON `policy_versions`(`hash`);
CREATE UNIQUE INDEX `idx_policy_versions_in_force` ON `policy_versions`(`status`) WHERE status = 'in_force';
CREATE TABLE `policy_signatures` (`id` integer PRIMARY KEY AUTOINCREMENT,`version_id` integer NOT NULL,`staff_id` text,`staff_name` text,`note` text,`created_at` datetime);
CREATE UNIQUE INDEX `idx_policy_signatures_once` ON `policy_signatures`(`version_id`,`staff_id`);
ALTER TABLE `instances` ADD `policy_error` text DEFAULT "";
CREATE INDEX `idx_tool_calls_insights` ON `tool_calls`(`tool`,`rule`,`decision`,`status`,`created_at`);
CREATE INDEX `idx_approvals_created` ON `approvals`(`created_at`);

-- +goose Down
DROP INDEX `idx_approvals_created`;
DROP INDEX `idx_tool_calls_insights`;
ALTER TABLE `instances` DROP COLUMN `policy_error`;
DROP TABLE `policy_signatures`;
DROP TABLE `policy_versions`;

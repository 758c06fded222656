-- The schema of the last release made without versioned migrations (the
-- tables gorm made from the records at commit 3c16be5). IF NOT EXISTS: a
-- database made by that release is already in this shape.

-- +goose Up
-- (The demo shop's tables, once here, are made by demo/sqlite, only in a
-- database that --demo sets up; a database made before keeps them.)
CREATE TABLE IF NOT EXISTS `runs` (`id` text,`customer_id` text,`customer_name` text,`channel` text,`status` text,`token_hash` text,`last_error` text,`agent_id` text,`session` text,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX IF NOT EXISTS `idx_runs_agent_session` ON `runs`(`agent_id`,`session`) WHERE agent_id <> '';
CREATE INDEX IF NOT EXISTS `idx_runs_token_hash` ON `runs`(`token_hash`);
CREATE INDEX IF NOT EXISTS `idx_runs_status` ON `runs`(`status`);
CREATE INDEX IF NOT EXISTS `idx_runs_customer_id` ON `runs`(`customer_id`);
CREATE TABLE IF NOT EXISTS `tool_calls` (`id` text,`run_id` text NOT NULL,`customer_id` text,`turn_id` integer DEFAULT 0,`model_call_id` text,`tool` text,`risk` text,`raw_args` text,`args` text,`args_hash` text,`original_args` text,`status` text,`decision` text,`rule` text,`reason` text,`policy_version` text,`required_approvals` integer,`required_role` text,`expires_at` datetime,`idempotency_key` text,`agent_key` text,`context` text,`error` text,`error_detail` text,`result` text,`created_at` datetime,`updated_at` datetime,`decided_at` datetime,`finished_at` datetime,PRIMARY KEY (`id`),CONSTRAINT `fk_tool_calls_run` FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON DELETE RESTRICT)WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS `idx_tool_calls_agent_key` ON `tool_calls`(`agent_key`) WHERE agent_key <> '';
CREATE INDEX IF NOT EXISTS `idx_tool_calls_run_waiting` ON `tool_calls`(`run_id`,`status`) WHERE status <> 'succeeded';
CREATE INDEX IF NOT EXISTS `idx_tool_calls_run_id` ON `tool_calls`(`run_id`);
CREATE INDEX IF NOT EXISTS `idx_tool_calls_customer_created` ON `tool_calls`(`customer_id`,`created_at`,`id`);
CREATE INDEX IF NOT EXISTS `idx_tool_calls_tool_created` ON `tool_calls`(`tool`,`created_at`,`id`);
CREATE INDEX IF NOT EXISTS `idx_tool_calls_status_created` ON `tool_calls`(`status`,`created_at`,`id`) WHERE status <> 'succeeded';
CREATE INDEX IF NOT EXISTS `idx_tool_calls_created` ON `tool_calls`(`created_at`,`id`);
CREATE TABLE IF NOT EXISTS `turns` (`id` integer PRIMARY KEY AUTOINCREMENT,`run_id` text NOT NULL,`seq` integer,`role` text,`text` text,`calls` text,`tool_call_id` text,`marker` text,`created_at` datetime,CONSTRAINT `fk_turns_run` FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON DELETE RESTRICT);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_turns_run_marker` ON `turns`(`run_id`,`marker`) WHERE marker <> '';
CREATE UNIQUE INDEX IF NOT EXISTS `idx_turns_run_seq` ON `turns`(`run_id`,`seq`);
CREATE TABLE IF NOT EXISTS `approvals` (`id` integer PRIMARY KEY AUTOINCREMENT,`tool_call_id` text NOT NULL,`staff_id` text,`staff_name` text,`staff_role` text,`verdict` text,`note` text,`args` text,`args_hash` text,`edited` numeric,`created_at` datetime,CONSTRAINT `fk_approvals_tool_call` FOREIGN KEY (`tool_call_id`) REFERENCES `tool_calls`(`id`) ON DELETE RESTRICT);
CREATE INDEX IF NOT EXISTS `idx_approvals_staff_id` ON `approvals`(`staff_id`);
CREATE INDEX IF NOT EXISTS `idx_approvals_tool_call_id` ON `approvals`(`tool_call_id`);
CREATE TABLE IF NOT EXISTS `audit_events` (`seq` integer,`at` datetime,`actor` text,`kind` text,`subject` text,`payload` text,`prev_hash` text,`hash` text,PRIMARY KEY (`seq`));
CREATE INDEX IF NOT EXISTS `idx_audit_events_subject` ON `audit_events`(`subject`);
CREATE TABLE IF NOT EXISTS `audit_heads` (`id` integer,`seq` integer,`hash` text,PRIMARY KEY (`id`));
CREATE TABLE IF NOT EXISTS `staffs` (`id` text,`email` text,`name` text,`role` text,`password_hash` text,`disabled` numeric,`created_at` datetime,`updated_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX IF NOT EXISTS `idx_staffs_email` ON `staffs`(`email`);
CREATE TABLE IF NOT EXISTS `sessions` (`id_hash` text,`staff_id` text NOT NULL,`csrf_token` text,`created_at` datetime,`last_seen_at` datetime,PRIMARY KEY (`id_hash`),CONSTRAINT `fk_sessions_staff` FOREIGN KEY (`staff_id`) REFERENCES `staffs`(`id`) ON DELETE CASCADE);
CREATE INDEX IF NOT EXISTS `idx_sessions_staff_id` ON `sessions`(`staff_id`);
CREATE TABLE IF NOT EXISTS `api_tokens` (`id` text,`staff_id` text NOT NULL,`token_hash` text,`created_at` datetime,`last_used_at` datetime,PRIMARY KEY (`id`),CONSTRAINT `fk_api_tokens_staff` FOREIGN KEY (`staff_id`) REFERENCES `staffs`(`id`) ON DELETE CASCADE);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_api_tokens_token_hash` ON `api_tokens`(`token_hash`);
CREATE INDEX IF NOT EXISTS `idx_api_tokens_staff_id` ON `api_tokens`(`staff_id`);
CREATE TABLE IF NOT EXISTS `agents` (`id` text,`name` text,`key_hash` text,`created_at` datetime,`revoked_at` datetime,`last_used_at` datetime,PRIMARY KEY (`id`));
CREATE UNIQUE INDEX IF NOT EXISTS `idx_agents_key_hash` ON `agents`(`key_hash`);
CREATE UNIQUE INDEX IF NOT EXISTS `idx_agents_name` ON `agents`(`name`);

-- +goose Down
-- The first version has no way down: restore a backup instead.
SELECT 1;

-- Standing grants: a supervisor, while approving, lets later calls of the
-- same tool for the same customer run without asking, within a bound.

-- +goose Up
CREATE TABLE `grants` (`id` text,`tool` text,`customer_id` text,`customer_name` text,`agent_id` text DEFAULT "",`max_uses` integer,`uses` integer,`max_amount` real,`used_amount` real,`expires_at` datetime,`role` text,`created_by_id` text,`created_by` text,`source_call_id` text,`note` text,`created_at` datetime,`last_used_at` datetime,`revoked_at` datetime,`revoked_by` text DEFAULT "",`revoke_reason` text,PRIMARY KEY (`id`));
CREATE INDEX `idx_grants_expires_at` ON `grants`(`expires_at`);
CREATE INDEX `idx_grants_lookup` ON `grants`(`customer_id`,`tool`);

-- +goose Down
DROP TABLE `grants`;

-- The shadow policy: calls on which it disagreed with the policy in force.

-- +goose Up
CREATE TABLE `shadow_decisions` (`id` integer PRIMARY KEY AUTOINCREMENT,`tool_call_id` text NOT NULL,`policy_version` text,`decided` text,`shadow` text,`created_at` datetime);
CREATE INDEX `idx_shadow_decisions_version_created` ON `shadow_decisions`(`policy_version`,`created_at`);
CREATE INDEX `idx_shadow_decisions_tool_call_id` ON `shadow_decisions`(`tool_call_id`);

-- +goose Down
DROP TABLE `shadow_decisions`;

-- What each person was shown about an action when they opened it (the
-- review's lookups, as they answered then), and on each decision what its
-- maker saw: a decided action shows the facts it was decided on.

-- +goose Up
CREATE TABLE `reviews` (`id` text,`tool_call_id` text,`staff_id` text,`facts` text,`created_at` datetime,PRIMARY KEY (`id`));
CREATE INDEX `idx_reviews_tool_call_id` ON `reviews`(`tool_call_id`);
ALTER TABLE `approvals` ADD COLUMN `seen` text;

-- +goose Down
ALTER TABLE `approvals` DROP COLUMN `seen`;
DROP TABLE `reviews`;

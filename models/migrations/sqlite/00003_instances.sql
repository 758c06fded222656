-- Several instances: each running server beats in instances; a call
-- records the instance that runs it (owner), a run the instance stepping it
-- (worker, until lease_until).

-- +goose Up
CREATE TABLE `instances` (`id` text,`host` text,`started_at` datetime,`heartbeat_at` datetime,PRIMARY KEY (`id`));
ALTER TABLE `runs` ADD COLUMN `worker` text DEFAULT "";
ALTER TABLE `runs` ADD COLUMN `lease_until` datetime;
ALTER TABLE `tool_calls` ADD COLUMN `owner` text DEFAULT "";

-- +goose Down
ALTER TABLE `tool_calls` DROP COLUMN `owner`;
ALTER TABLE `runs` DROP COLUMN `lease_until`;
ALTER TABLE `runs` DROP COLUMN `worker`;
DROP TABLE `instances`;

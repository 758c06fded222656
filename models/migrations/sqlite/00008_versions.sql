-- What each call was made against and what each instance runs: a call
-- records its tool's definition hash (an approver sees when the tool
-- changed since), an instance the policy and tools versions it decides with
-- (several instances on different versions are shown to admins).

-- +goose Up
ALTER TABLE `tool_calls` ADD COLUMN `tool_hash` text DEFAULT "";
ALTER TABLE `instances` ADD COLUMN `policy_version` text DEFAULT "";
ALTER TABLE `instances` ADD COLUMN `tools_version` text DEFAULT "";

-- +goose Down
ALTER TABLE `instances` DROP COLUMN `tools_version`;
ALTER TABLE `instances` DROP COLUMN `policy_version`;
ALTER TABLE `tool_calls` DROP COLUMN `tool_hash`;

-- One action per intent: an outside agent's call that waited for a person
-- records when the agent was handed its outcome; until then the same
-- request of that agent is answered with it instead of a second call.

-- +goose Up
ALTER TABLE `tool_calls` ADD COLUMN `delivered_at` datetime;

-- +goose Down
ALTER TABLE `tool_calls` DROP COLUMN `delivered_at`;

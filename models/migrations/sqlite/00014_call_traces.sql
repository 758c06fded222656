-- The trace a call belongs to (a W3C traceparent, with tracing on), so that
-- a person's decision and the execution later join the call's trace.

-- +goose Up
ALTER TABLE `tool_calls` ADD COLUMN `trace` text DEFAULT "";

-- +goose Down
ALTER TABLE `tool_calls` DROP COLUMN `trace`;

-- The audit page's text search ("q") looks for a piece of text anywhere in a
-- call's arguments, case-insensitively (ILIKE): trigram indexes let
-- PostgreSQL answer that without reading every call.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX idx_tool_calls_args_trgm ON tool_calls USING gin (args gin_trgm_ops);
CREATE INDEX idx_tool_calls_raw_args_trgm ON tool_calls USING gin (raw_args gin_trgm_ops);

-- +goose Down
DROP INDEX idx_tool_calls_raw_args_trgm;
DROP INDEX idx_tool_calls_args_trgm;

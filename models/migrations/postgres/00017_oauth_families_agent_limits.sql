-- OAuth tokens keep the sign-in they descend from (family): a refresh token
-- used twice, or a code used twice, revokes every token of that sign-in.
-- Agents may have limits of their own (0: the instance's flags).

-- +goose Up
ALTER TABLE oauth_records ADD family varchar(64) DEFAULT '';
CREATE INDEX idx_oauth_records_family ON oauth_records (family);
ALTER TABLE agents ADD calls_per_second bigint DEFAULT 0;
ALTER TABLE agents ADD call_burst bigint DEFAULT 0;
ALTER TABLE agents ADD max_waiting bigint DEFAULT 0;

-- +goose Down
ALTER TABLE agents DROP COLUMN max_waiting;
ALTER TABLE agents DROP COLUMN call_burst;
ALTER TABLE agents DROP COLUMN calls_per_second;
DROP INDEX idx_oauth_records_family;
ALTER TABLE oauth_records DROP COLUMN family;

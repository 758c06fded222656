-- Policy versions in the database: every version proposed, with its tests
-- and its replay; the one in force for every instance; the admins who
-- countersigned each. Instances say when they could not load the version
-- in force. Insights read decisions by tool and rule, and approvals by
-- time, from indexes of their own.

-- +goose Up
CREATE TABLE policy_versions (
    id bigserial PRIMARY KEY,
    hash varchar(64),
    yaml text,
    note text,
    source varchar(300),
    author_id varchar(64),
    author_name varchar(200),
    tools_version varchar(64),
    tests text,
    replay text,
    replay_digest varchar(64),
    base_id bigint,
    people_needed bigint,
    status varchar(16),
    created_at timestamptz,
    in_force_at timestamptz,
    ended_at timestamptz,
    ended_by varchar(200),
    reason text
);
CREATE INDEX idx_policy_versions_hash ON policy_versions (hash);
CREATE UNIQUE INDEX idx_policy_versions_in_force ON policy_versions (status) WHERE status = 'in_force';
CREATE TABLE policy_signatures (
    id bigserial PRIMARY KEY,
    version_id bigint NOT NULL,
    staff_id varchar(64),
    staff_name varchar(200),
    note text,
    created_at timestamptz
);
CREATE UNIQUE INDEX idx_policy_signatures_once ON policy_signatures (version_id, staff_id);
ALTER TABLE instances ADD COLUMN policy_error text DEFAULT '';
CREATE INDEX idx_tool_calls_insights ON tool_calls (tool, rule, decision, status, created_at);
CREATE INDEX idx_approvals_created ON approvals (created_at);

-- +goose Down
DROP INDEX idx_approvals_created;
DROP INDEX idx_tool_calls_insights;
ALTER TABLE instances DROP COLUMN policy_error;
DROP TABLE policy_signatures;
DROP TABLE policy_versions;

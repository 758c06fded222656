-- Standing grants: a supervisor, while approving, lets later calls of the
-- same tool for the same customer run without asking, within a bound.

-- +goose Up
CREATE TABLE grants (
    id varchar(40) PRIMARY KEY,
    tool varchar(100),
    customer_id varchar(64),
    customer_name varchar(200),
    agent_id varchar(40) DEFAULT '',
    max_uses bigint,
    uses bigint,
    max_amount double precision,
    used_amount double precision,
    expires_at timestamptz,
    role varchar(16),
    created_by_id varchar(40),
    created_by varchar(200),
    source_call_id varchar(40),
    note text,
    created_at timestamptz,
    last_used_at timestamptz,
    revoked_at timestamptz,
    revoked_by varchar(200) DEFAULT '',
    revoke_reason text
);
CREATE INDEX idx_grants_expires_at ON grants (expires_at);
CREATE INDEX idx_grants_lookup ON grants (customer_id, tool);

-- +goose Down
DROP TABLE grants;

-- The schema of the records at the first versioned release, for PostgreSQL:
-- the same tables, columns and indexes as SQLite's 00001, in PostgreSQL's
-- types.

-- +goose Up
-- (The demo shop's tables, once here, are made by demo/postgres, only in a
-- database that --demo sets up; a database made before keeps them.)
CREATE TABLE runs (
    id varchar(40) PRIMARY KEY,
    customer_id varchar(64),
    customer_name varchar(200),
    channel varchar(32),
    status varchar(16),
    token_hash varchar(64),
    last_error text,
    agent_id varchar(40),
    session varchar(200),
    created_at timestamptz,
    updated_at timestamptz
);
CREATE UNIQUE INDEX idx_runs_agent_session ON runs (agent_id, session) WHERE agent_id <> '';
CREATE INDEX idx_runs_token_hash ON runs (token_hash);
CREATE INDEX idx_runs_status ON runs (status);
CREATE INDEX idx_runs_customer_id ON runs (customer_id);

CREATE TABLE tool_calls (
    id varchar(40) PRIMARY KEY,
    run_id varchar(40) NOT NULL REFERENCES runs (id) ON DELETE RESTRICT,
    customer_id varchar(64),
    turn_id bigint DEFAULT 0,
    model_call_id varchar(100),
    tool varchar(100),
    risk varchar(16),
    raw_args text,
    args text,
    args_hash varchar(64),
    original_args text,
    status varchar(16),
    decision varchar(16),
    rule varchar(100),
    reason text,
    policy_version varchar(64),
    required_approvals bigint,
    required_role varchar(16),
    expires_at timestamptz,
    idempotency_key varchar(80),
    agent_key varchar(300),
    context text,
    error text,
    error_detail text,
    result text,
    created_at timestamptz,
    updated_at timestamptz,
    decided_at timestamptz,
    finished_at timestamptz
);
CREATE UNIQUE INDEX idx_tool_calls_agent_key ON tool_calls (agent_key) WHERE agent_key <> '';
CREATE INDEX idx_tool_calls_run_waiting ON tool_calls (run_id, status) WHERE status <> 'succeeded';
CREATE INDEX idx_tool_calls_run_id ON tool_calls (run_id);
CREATE INDEX idx_tool_calls_customer_created ON tool_calls (customer_id, created_at, id);
CREATE INDEX idx_tool_calls_tool_created ON tool_calls (tool, created_at, id);
CREATE INDEX idx_tool_calls_status_created ON tool_calls (status, created_at, id) WHERE status <> 'succeeded';
CREATE INDEX idx_tool_calls_created ON tool_calls (created_at, id);

CREATE TABLE turns (
    id bigserial PRIMARY KEY,
    run_id varchar(40) NOT NULL REFERENCES runs (id) ON DELETE RESTRICT,
    seq bigint,
    role varchar(16),
    text text,
    calls text,
    tool_call_id varchar(40),
    marker varchar(80),
    created_at timestamptz
);
CREATE UNIQUE INDEX idx_turns_run_marker ON turns (run_id, marker) WHERE marker <> '';
CREATE UNIQUE INDEX idx_turns_run_seq ON turns (run_id, seq);

CREATE TABLE approvals (
    id bigserial PRIMARY KEY,
    tool_call_id varchar(40) NOT NULL REFERENCES tool_calls (id) ON DELETE RESTRICT,
    staff_id varchar(64),
    staff_name varchar(200),
    staff_role varchar(16),
    verdict varchar(16),
    note text,
    args text,
    args_hash varchar(64),
    edited boolean,
    created_at timestamptz
);
CREATE INDEX idx_approvals_staff_id ON approvals (staff_id);
CREATE INDEX idx_approvals_tool_call_id ON approvals (tool_call_id);

CREATE TABLE audit_events (
    seq bigint PRIMARY KEY,
    at timestamptz,
    actor varchar(200),
    kind varchar(64),
    subject varchar(64),
    payload text,
    prev_hash varchar(64),
    hash varchar(64)
);
CREATE INDEX idx_audit_events_subject ON audit_events (subject);

-- The chain's head: its row is locked by every unit of work that appends
-- to the chain, which makes the chain one line across instances.
CREATE TABLE audit_heads (
    id bigint PRIMARY KEY,
    seq bigint,
    hash varchar(64)
);
INSERT INTO audit_heads (id, seq, hash) VALUES (1, 0, '');

CREATE TABLE staffs (
    id varchar(40) PRIMARY KEY,
    email varchar(200),
    name varchar(200),
    role varchar(16),
    password_hash varchar(200),
    disabled boolean,
    created_at timestamptz,
    updated_at timestamptz
);
CREATE UNIQUE INDEX idx_staffs_email ON staffs (email);
CREATE TABLE sessions (
    id_hash varchar(64) PRIMARY KEY,
    staff_id varchar(40) NOT NULL REFERENCES staffs (id) ON DELETE CASCADE,
    csrf_token varchar(64),
    created_at timestamptz,
    last_seen_at timestamptz
);
CREATE INDEX idx_sessions_staff_id ON sessions (staff_id);
CREATE TABLE api_tokens (
    id varchar(40) PRIMARY KEY,
    staff_id varchar(40) NOT NULL REFERENCES staffs (id) ON DELETE CASCADE,
    token_hash varchar(64),
    created_at timestamptz,
    last_used_at timestamptz
);
CREATE UNIQUE INDEX idx_api_tokens_token_hash ON api_tokens (token_hash);
CREATE INDEX idx_api_tokens_staff_id ON api_tokens (staff_id);
CREATE TABLE agents (
    id varchar(40) PRIMARY KEY,
    name varchar(100),
    key_hash varchar(64),
    created_at timestamptz,
    revoked_at timestamptz,
    last_used_at timestamptz
);
CREATE UNIQUE INDEX idx_agents_key_hash ON agents (key_hash);
CREATE UNIQUE INDEX idx_agents_name ON agents (name);

-- +goose Down
-- The first version has no way down: restore a backup instead.
SELECT 1;

-- Rate limits shared by every instance on one database (sign-in, chat,
-- the runs API): a token bucket per limit and hashed key. SQLite has no
-- such table: one instance keeps its limits in memory.

-- +goose Up
CREATE TABLE rate_buckets (
    name varchar(16) NOT NULL,
    key bytea NOT NULL,
    tokens double precision NOT NULL,
    at timestamptz NOT NULL,
    PRIMARY KEY (name, key)
);
CREATE INDEX idx_rate_buckets_at ON rate_buckets (at);

-- +goose Down
DROP TABLE rate_buckets;

-- Several instances: each running server beats in instances; a call
-- records the instance that runs it (owner), a run the instance stepping it
-- (worker, until lease_until).

-- +goose Up
CREATE TABLE instances (
    id varchar(40) PRIMARY KEY,
    host varchar(200),
    started_at timestamptz,
    heartbeat_at timestamptz
);
ALTER TABLE runs ADD COLUMN worker varchar(40) DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_until timestamptz;
ALTER TABLE tool_calls ADD COLUMN owner varchar(40) DEFAULT '';

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN owner;
ALTER TABLE runs DROP COLUMN lease_until;
ALTER TABLE runs DROP COLUMN worker;
DROP TABLE instances;

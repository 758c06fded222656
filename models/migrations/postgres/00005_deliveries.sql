-- Reaching people outside: deliveries (webhooks, Slack, email) stored with
-- the change they tell of; a staff account's Slack user; when a pending
-- action was marked overdue and when its approvers were reminded.

-- +goose Up
CREATE TABLE deliveries (
    id bigserial PRIMARY KEY,
    channel varchar(16),
    target varchar(300),
    event varchar(40),
    subject varchar(40),
    body text,
    status varchar(16),
    attempts bigint,
    next_at timestamptz,
    claimed_by varchar(40) DEFAULT '',
    claimed_until timestamptz,
    last_error text,
    ref varchar(200) DEFAULT '',
    created_at timestamptz,
    delivered_at timestamptz
);
CREATE INDEX idx_deliveries_created_at ON deliveries (created_at);
CREATE INDEX idx_deliveries_due ON deliveries (status, next_at);
CREATE INDEX idx_deliveries_subject ON deliveries (subject);
ALTER TABLE staffs ADD COLUMN slack_user_id varchar(40) DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN overdue_at timestamptz;
ALTER TABLE tool_calls ADD COLUMN reminded_at timestamptz;

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN reminded_at;
ALTER TABLE tool_calls DROP COLUMN overdue_at;
ALTER TABLE staffs DROP COLUMN slack_user_id;
DROP TABLE deliveries;

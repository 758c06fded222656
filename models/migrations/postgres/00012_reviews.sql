-- What each person was shown about an action when they opened it (the
-- review's lookups, as they answered then), and on each decision what its
-- maker saw: a decided action shows the facts it was decided on.

-- +goose Up
CREATE TABLE reviews (
    id varchar(40) PRIMARY KEY,
    tool_call_id varchar(40),
    staff_id varchar(64),
    facts text,
    created_at timestamptz
);
CREATE INDEX idx_reviews_tool_call_id ON reviews (tool_call_id);
ALTER TABLE approvals ADD COLUMN seen text;

-- +goose Down
ALTER TABLE approvals DROP COLUMN seen;
DROP TABLE reviews;

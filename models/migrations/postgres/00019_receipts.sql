-- Proof of what ran: what each approval was given under (the tool's
-- definition, the policy), signed receipts of final calls, and the keys
-- that sign them.

-- +goose Up
ALTER TABLE approvals ADD COLUMN tool_hash varchar(64) DEFAULT '';
ALTER TABLE approvals ADD COLUMN policy_version varchar(64) DEFAULT '';
CREATE TABLE receipts (
    call_id varchar(40) PRIMARY KEY,
    key_id varchar(64),
    jws text,
    created_at timestamptz
);
CREATE TABLE receipt_keys (
    id varchar(64) PRIMARY KEY,
    public text,
    private text DEFAULT '',
    created_at timestamptz
);
-- +goose Down
DROP TABLE receipt_keys;
DROP TABLE receipts;
ALTER TABLE approvals DROP COLUMN policy_version;
ALTER TABLE approvals DROP COLUMN tool_hash;

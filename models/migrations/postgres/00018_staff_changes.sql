-- Who may sign is countersigned: staff changes proposed by one admin and
-- approved by others, their signatures, one-time enrollment links, and how
-- each account came to be.

-- +goose Up
ALTER TABLE staffs ADD COLUMN origin varchar(16) DEFAULT '';
ALTER TABLE staffs ADD COLUMN told_at timestamptz;
ALTER TABLE staffs ADD COLUMN sso_subject varchar(300) DEFAULT '';
CREATE TABLE staff_changes (
    id varchar(40) PRIMARY KEY,
    kind varchar(16),
    staff_id varchar(40),
    email varchar(200),
    name varchar(200),
    role varchar(16),
    status varchar(16),
    proposed_by varchar(40),
    proposer_name varchar(200),
    people_needed bigint,
    reason text,
    ended_by varchar(200),
    created_at timestamptz,
    ended_at timestamptz,
    mapping text DEFAULT ''
);
CREATE INDEX idx_staff_changes_email ON staff_changes (email);
CREATE INDEX idx_staff_changes_staff_id ON staff_changes (staff_id);
CREATE INDEX idx_staff_changes_status ON staff_changes (status);
CREATE TABLE staff_change_signatures (
    id bigserial PRIMARY KEY,
    change_id varchar(40) NOT NULL,
    staff_id varchar(40),
    staff_name varchar(200),
    created_at timestamptz,
    passkey text DEFAULT ''
);
CREATE UNIQUE INDEX idx_staff_change_signatures_once ON staff_change_signatures (change_id, staff_id);
CREATE TABLE enrollments (
    id varchar(40) PRIMARY KEY,
    staff_id varchar(40) NOT NULL,
    token_hash varchar(64),
    purpose varchar(16),
    change_id varchar(40),
    created_by varchar(200),
    created_at timestamptz,
    expires_at timestamptz,
    used_at timestamptz
);
CREATE INDEX idx_enrollments_staff_id ON enrollments (staff_id);
CREATE UNIQUE INDEX idx_enrollments_token_hash ON enrollments (token_hash);

ALTER TABLE approvals ADD COLUMN passkey text DEFAULT '';
ALTER TABLE policy_signatures ADD COLUMN passkey text DEFAULT '';
CREATE TABLE passkeys (
    id varchar(400) PRIMARY KEY,
    staff_id varchar(40) NOT NULL,
    name varchar(100),
    rp_id varchar(200),
    credential text,
    created_at timestamptz,
    last_used_at timestamptz,
    removed_at timestamptz
);
CREATE INDEX idx_passkeys_staff_id ON passkeys (staff_id);
-- +goose Down
DROP TABLE passkeys;
ALTER TABLE approvals DROP COLUMN passkey;
ALTER TABLE policy_signatures DROP COLUMN passkey;
DROP TABLE enrollments;
DROP TABLE staff_change_signatures;
DROP TABLE staff_changes;
ALTER TABLE staffs DROP COLUMN origin;
ALTER TABLE staffs DROP COLUMN told_at;
ALTER TABLE staffs DROP COLUMN sso_subject;

-- A staff account's address on each channel people answer through, in one
-- table (models.StaffLink) instead of a column per channel: a channel that
-- links people (Slack's user id) adds no column of its own. The Slack
-- links made so far move into it.

-- +goose Up
CREATE TABLE staff_links (
    staff_id varchar(40),
    channel varchar(40),
    address varchar(200) NOT NULL,
    created_at timestamptz,
    PRIMARY KEY (staff_id, channel)
);
CREATE UNIQUE INDEX idx_staff_links_address ON staff_links (channel, address);
INSERT INTO staff_links (staff_id, channel, address, created_at)
    SELECT id, 'slack', slack_user_id, updated_at FROM staffs WHERE slack_user_id <> '';
ALTER TABLE staffs DROP COLUMN slack_user_id;

-- +goose Down
ALTER TABLE staffs ADD COLUMN slack_user_id varchar(40) DEFAULT '';
UPDATE staffs SET slack_user_id = l.address FROM staff_links l WHERE l.staff_id = staffs.id AND l.channel = 'slack';
DROP TABLE staff_links;

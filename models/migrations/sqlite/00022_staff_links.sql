-- A staff account's address on each channel people answer through, in one
-- table (models.StaffLink) instead of a column per channel: a channel that
-- links people (Slack's user id) adds no column of its own. The Slack
-- links made so far move into it.

-- +goose Up
CREATE TABLE `staff_links` (`staff_id` text,`channel` text,`address` text NOT NULL,`created_at` datetime,PRIMARY KEY (`staff_id`,`channel`));
CREATE UNIQUE INDEX `idx_staff_links_address` ON `staff_links`(`channel`,`address`);
INSERT INTO `staff_links` (`staff_id`, `channel`, `address`, `created_at`)
    SELECT `id`, 'slack', `slack_user_id`, `updated_at` FROM `staffs` WHERE `slack_user_id` <> '';
ALTER TABLE `staffs` DROP COLUMN `slack_user_id`;

-- +goose Down
ALTER TABLE `staffs` ADD COLUMN `slack_user_id` text DEFAULT "";
UPDATE `staffs` SET `slack_user_id` = (SELECT `address` FROM `staff_links` WHERE `staff_links`.`staff_id` = `staffs`.`id` AND `channel` = 'slack')
    WHERE `id` IN (SELECT `staff_id` FROM `staff_links` WHERE `channel` = 'slack');
DROP TABLE `staff_links`;

-- Policy versions in the database: every version proposed, with its tests
-- and its replay; the one in force for every instance; the admins who
-- countersigned each. Instances say when they could not load the version
-- in force. Insights read counts by hour (call_hours, kept by triggers)
-- and verdicts with their times from a covering index.

-- +goose Up
CREATE TABLE `policy_versions` (`id` integer PRIMARY KEY AUTOINCREMENT,`hash` text,`yaml` text,`note` text,`source` text,`author_id` text,`author_name` text,`tools_version` text,`tests` text,`replay` text,`replay_digest` text,`base_id` integer,`people_needed` integer,`status` text,`created_at` datetime,`in_force_at` datetime,`ended_at` datetime,`ended_by` text,`reason` text);
CREATE INDEX `idx_policy_versions_hash` ON `policy_versions`(`hash`);
CREATE UNIQUE INDEX `idx_policy_versions_in_force` ON `policy_versions`(`status`) WHERE status = 'in_force';
CREATE TABLE `policy_signatures` (`id` integer PRIMARY KEY AUTOINCREMENT,`version_id` integer NOT NULL,`staff_id` text,`staff_name` text,`note` text,`created_at` datetime);
CREATE UNIQUE INDEX `idx_policy_signatures_once` ON `policy_signatures`(`version_id`,`staff_id`);
ALTER TABLE `instances` ADD `policy_error` text DEFAULT "";
ALTER TABLE `approvals` ADD `tool` text DEFAULT "";
ALTER TABLE `approvals` ADD `rule` text DEFAULT "";
ALTER TABLE `approvals` ADD `took_s` real;
ALTER TABLE `approvals` ADD `settled_s` real;
UPDATE `approvals` SET
    `tool` = COALESCE((SELECT c.tool FROM tool_calls c WHERE c.id = approvals.tool_call_id), ''),
    `rule` = COALESCE((SELECT c.rule FROM tool_calls c WHERE c.id = approvals.tool_call_id), ''),
    `took_s` = MAX(0, (julianday(approvals.created_at) - julianday(MAX(
        COALESCE((SELECT c.created_at FROM tool_calls c WHERE c.id = approvals.tool_call_id), approvals.created_at),
        COALESCE((SELECT MAX(p.created_at) FROM approvals p WHERE p.tool_call_id = approvals.tool_call_id AND p.id < approvals.id), '')))) * 86400.0),
    `settled_s` = CASE WHEN approvals.id = (SELECT MAX(p.id) FROM approvals p WHERE p.tool_call_id = approvals.tool_call_id)
        AND (SELECT c.status FROM tool_calls c WHERE c.id = approvals.tool_call_id) <> 'pending'
        THEN MAX(0, (julianday(approvals.created_at) - julianday((SELECT c.created_at FROM tool_calls c WHERE c.id = approvals.tool_call_id))) * 86400.0) END;
CREATE INDEX `idx_approvals_insights` ON `approvals`(`created_at`,`staff_id`,`verdict`,`edited`,`tool`,`rule`,`took_s`,`settled_s`);
CREATE TABLE `call_hours` (`hour` text,`tool` text,`rule` text,`decision` text,`outcome` text,`n` integer NOT NULL DEFAULT 0,PRIMARY KEY (`hour`,`tool`,`rule`,`decision`,`outcome`));
INSERT INTO call_hours (hour, tool, rule, decision, outcome, n)
    SELECT substr(created_at, 1, 13), COALESCE(tool, ''), COALESCE(rule, ''), COALESCE(decision, ''), (CASE decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(status, '') END) ELSE COALESCE(status, '') END), count(*)
    FROM tool_calls GROUP BY 1, 2, 3, 4, 5;
-- +goose StatementBegin
CREATE TRIGGER call_hours_recorded AFTER INSERT ON tool_calls BEGIN
    INSERT INTO call_hours (hour, tool, rule, decision, outcome, n)
    VALUES (substr(NEW.created_at, 1, 13), COALESCE(NEW.tool, ''), COALESCE(NEW.rule, ''), COALESCE(NEW.decision, ''), (CASE NEW.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN NEW.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(NEW.status, '') END) ELSE COALESCE(NEW.status, '') END), 1)
    ON CONFLICT (hour, tool, rule, decision, outcome) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER call_hours_changed AFTER UPDATE OF status, rule, decision ON tool_calls
WHEN OLD.rule IS NOT NEW.rule OR OLD.decision IS NOT NEW.decision OR (CASE OLD.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN OLD.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(OLD.status, '') END) ELSE COALESCE(OLD.status, '') END) IS NOT (CASE NEW.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN NEW.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(NEW.status, '') END) ELSE COALESCE(NEW.status, '') END) BEGIN
    UPDATE call_hours SET n = n - 1 WHERE hour = substr(OLD.created_at, 1, 13) AND tool = COALESCE(OLD.tool, '')
        AND rule = COALESCE(OLD.rule, '') AND decision = COALESCE(OLD.decision, '') AND outcome = (CASE OLD.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN OLD.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(OLD.status, '') END) ELSE COALESCE(OLD.status, '') END);
    INSERT INTO call_hours (hour, tool, rule, decision, outcome, n)
    VALUES (substr(NEW.created_at, 1, 13), COALESCE(NEW.tool, ''), COALESCE(NEW.rule, ''), COALESCE(NEW.decision, ''), (CASE NEW.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN NEW.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(NEW.status, '') END) ELSE COALESCE(NEW.status, '') END), 1)
    ON CONFLICT (hour, tool, rule, decision, outcome) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER call_hours_changed;
DROP TRIGGER call_hours_recorded;
DROP TABLE `call_hours`;
DROP INDEX `idx_approvals_insights`;
ALTER TABLE `approvals` DROP COLUMN `settled_s`;
ALTER TABLE `approvals` DROP COLUMN `took_s`;
ALTER TABLE `approvals` DROP COLUMN `rule`;
ALTER TABLE `approvals` DROP COLUMN `tool`;
ALTER TABLE `instances` DROP COLUMN `policy_error`;
DROP TABLE `policy_signatures`;
DROP TABLE `policy_versions`;

-- Derived data follows the audit log (models/storage/follow.go): the
-- insights' counts by hour are no longer kept by triggers in the
-- transaction that records a call. A follower reads the events committed
-- since its mark (derived_marks, one per derived table and chain) and brings
-- call_hours (with call_counted: how each call is counted now) up to date.
-- The audit search's FTS5 index is not a migration (it needs a driver with
-- FTS5): its triggers go, and the store makes it again, followed
-- (models/storage/textindex.go).

-- +goose Up
CREATE TABLE derived_marks (
    name text,
    chain integer,
    seq integer NOT NULL DEFAULT 0,
    caught_up_at datetime,
    PRIMARY KEY (name, chain)
);
CREATE TABLE call_counted (
    call_id text PRIMARY KEY,
    hour text,
    tool text,
    rule text,
    decision text,
    outcome text
);
INSERT INTO call_counted (call_id, hour, tool, rule, decision, outcome)
    SELECT id, substr(created_at, 1, 13), COALESCE(tool, ''), COALESCE(rule, ''), COALESCE(decision, ''), (CASE decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(status, '') END) ELSE COALESCE(status, '') END)
    FROM tool_calls;
INSERT INTO derived_marks (name, chain, seq) SELECT 'call_hours', chain, seq FROM audit_heads;
DROP TRIGGER call_hours_changed;
DROP TRIGGER call_hours_recorded;
DROP TRIGGER IF EXISTS audit_text_insert;
DROP TRIGGER IF EXISTS audit_text_update;

-- +goose Down
-- The counts by hour are made again from the calls, kept by triggers again;
-- the store makes the search's index again when it opens.
DELETE FROM call_hours;
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
DROP TABLE IF EXISTS audit_text;
DROP TABLE IF EXISTS audit_text_keys;
DROP TABLE call_counted;
DROP TABLE derived_marks;

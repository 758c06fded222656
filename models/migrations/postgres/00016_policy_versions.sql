-- Policy versions in the database: every version proposed, with its tests
-- and its replay; the one in force for every instance; the admins who
-- countersigned each. Instances say when they could not load the version
-- in force. Insights read counts by hour (call_hours, kept by triggers)
-- and verdicts with their times from a covering index.

-- +goose Up
CREATE TABLE policy_versions (
    id bigserial PRIMARY KEY,
    hash varchar(64),
    yaml text,
    note text,
    source varchar(300),
    author_id varchar(64),
    author_name varchar(200),
    tools_version varchar(64),
    tests text,
    replay text,
    replay_digest varchar(64),
    base_id bigint,
    people_needed bigint,
    status varchar(16),
    created_at timestamptz,
    in_force_at timestamptz,
    ended_at timestamptz,
    ended_by varchar(200),
    reason text
);
CREATE INDEX idx_policy_versions_hash ON policy_versions (hash);
CREATE UNIQUE INDEX idx_policy_versions_in_force ON policy_versions (status) WHERE status = 'in_force';
CREATE TABLE policy_signatures (
    id bigserial PRIMARY KEY,
    version_id bigint NOT NULL,
    staff_id varchar(64),
    staff_name varchar(200),
    note text,
    created_at timestamptz
);
CREATE UNIQUE INDEX idx_policy_signatures_once ON policy_signatures (version_id, staff_id);
ALTER TABLE instances ADD COLUMN policy_error text DEFAULT '';
ALTER TABLE approvals ADD COLUMN tool varchar(100) DEFAULT '';
ALTER TABLE approvals ADD COLUMN rule varchar(100) DEFAULT '';
ALTER TABLE approvals ADD COLUMN took_s double precision;
ALTER TABLE approvals ADD COLUMN settled_s double precision;
UPDATE approvals a SET
    tool = COALESCE(c.tool, ''),
    rule = COALESCE(c.rule, ''),
    took_s = GREATEST(0, EXTRACT(EPOCH FROM (a.created_at - GREATEST(c.created_at,
        COALESCE((SELECT MAX(p.created_at) FROM approvals p WHERE p.tool_call_id = a.tool_call_id AND p.id < a.id), c.created_at))))),
    settled_s = CASE WHEN a.id = (SELECT MAX(p.id) FROM approvals p WHERE p.tool_call_id = a.tool_call_id) AND c.status <> 'pending'
        THEN GREATEST(0, EXTRACT(EPOCH FROM (a.created_at - c.created_at))) END
FROM tool_calls c WHERE c.id = a.tool_call_id;
CREATE INDEX idx_approvals_insights ON approvals (created_at, staff_id, verdict, edited, tool, rule, took_s, settled_s);
CREATE TABLE call_hours (
    hour varchar(16),
    tool varchar(100),
    rule varchar(100),
    decision varchar(16),
    outcome varchar(16),
    n bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, tool, rule, decision, outcome)
);
INSERT INTO call_hours (hour, tool, rule, decision, outcome, n)
    SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), COALESCE(tool, ''), COALESCE(rule, ''), COALESCE(decision, ''), (CASE decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(status, '') END) ELSE COALESCE(status, '') END), count(*)
    FROM tool_calls GROUP BY 1, 2, 3, 4, 5;
-- +goose StatementBegin
CREATE FUNCTION call_hours_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        UPDATE call_hours SET n = n - 1 WHERE hour = to_char(OLD.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24') AND tool = COALESCE(OLD.tool, '')
            AND rule = COALESCE(OLD.rule, '') AND decision = COALESCE(OLD.decision, '') AND outcome = (CASE OLD.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN OLD.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(OLD.status, '') END) ELSE COALESCE(OLD.status, '') END);
    END IF;
    INSERT INTO call_hours (hour, tool, rule, decision, outcome, n)
    VALUES (to_char(NEW.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), COALESCE(NEW.tool, ''), COALESCE(NEW.rule, ''), COALESCE(NEW.decision, ''), (CASE NEW.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN NEW.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(NEW.status, '') END) ELSE COALESCE(NEW.status, '') END), 1)
    ON CONFLICT (hour, tool, rule, decision, outcome) DO UPDATE SET n = call_hours.n + 1;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER call_hours_recorded AFTER INSERT ON tool_calls FOR EACH ROW EXECUTE FUNCTION call_hours_count();
CREATE TRIGGER call_hours_changed AFTER UPDATE OF status, rule, decision ON tool_calls FOR EACH ROW
    WHEN (OLD.rule IS DISTINCT FROM NEW.rule OR OLD.decision IS DISTINCT FROM NEW.decision OR (CASE OLD.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN OLD.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(OLD.status, '') END) ELSE COALESCE(OLD.status, '') END) IS DISTINCT FROM (CASE NEW.decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN NEW.status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(NEW.status, '') END) ELSE COALESCE(NEW.status, '') END))
    EXECUTE FUNCTION call_hours_count();

-- +goose Down
DROP TRIGGER call_hours_changed ON tool_calls;
DROP TRIGGER call_hours_recorded ON tool_calls;
DROP FUNCTION call_hours_count();
DROP TABLE call_hours;
DROP INDEX idx_approvals_insights;
ALTER TABLE approvals DROP COLUMN settled_s;
ALTER TABLE approvals DROP COLUMN took_s;
ALTER TABLE approvals DROP COLUMN rule;
ALTER TABLE approvals DROP COLUMN tool;
ALTER TABLE instances DROP COLUMN policy_error;
DROP TABLE policy_signatures;
DROP TABLE policy_versions;

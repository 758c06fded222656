-- Derived data follows the audit log (models/storage/follow.go): the
-- insights' counts by hour and the audit search's trigram indexes are no
-- longer kept in the transaction that records a call. A follower reads the
-- events committed since its mark (derived_marks, one per derived table and
-- chain) and brings call_hours (with call_counted: how each call is counted
-- now) and call_text (each version of a call's arguments, with the trigram
-- indexes tool_calls had) up to date. What exists is counted and indexed
-- here, up to every chain's head; as of when is the follower's to say.

-- +goose Up
CREATE TABLE derived_marks (
    name varchar(32),
    chain bigint,
    seq bigint NOT NULL DEFAULT 0,
    caught_up_at timestamptz,
    PRIMARY KEY (name, chain)
);
CREATE TABLE call_counted (
    call_id varchar(40) PRIMARY KEY,
    hour varchar(16),
    tool varchar(100),
    rule varchar(100),
    decision varchar(16),
    outcome varchar(16)
);
INSERT INTO call_counted (call_id, hour, tool, rule, decision, outcome)
    SELECT id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), COALESCE(tool, ''), COALESCE(rule, ''), COALESCE(decision, ''), (CASE decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN status IN ('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(status, '') END) ELSE COALESCE(status, '') END)
    FROM tool_calls;
CREATE TABLE call_text (
    key bigserial PRIMARY KEY,
    call_id varchar(40) NOT NULL,
    args_hash varchar(64) NOT NULL DEFAULT '',
    args text,
    raw_args text
);
INSERT INTO call_text (call_id, args_hash, args, raw_args)
    SELECT id, COALESCE(args_hash, ''), COALESCE(args, ''), COALESCE(raw_args, '') FROM tool_calls ORDER BY created_at, id;
CREATE UNIQUE INDEX idx_call_text_version ON call_text (call_id, args_hash);
CREATE INDEX idx_call_text_args_trgm ON call_text USING gin (args gin_trgm_ops);
CREATE INDEX idx_call_text_raw_args_trgm ON call_text USING gin (raw_args gin_trgm_ops);
INSERT INTO derived_marks (name, chain, seq)
    SELECT n.name, h.chain, h.seq FROM audit_heads h CROSS JOIN (VALUES ('call_hours'), ('call_text')) AS n (name);
DROP TRIGGER call_hours_changed ON tool_calls;
DROP TRIGGER call_hours_recorded ON tool_calls;
DROP FUNCTION call_hours_count();
DROP INDEX idx_tool_calls_raw_args_trgm;
DROP INDEX idx_tool_calls_args_trgm;

-- +goose Down
CREATE INDEX idx_tool_calls_args_trgm ON tool_calls USING gin (args gin_trgm_ops);
CREATE INDEX idx_tool_calls_raw_args_trgm ON tool_calls USING gin (raw_args gin_trgm_ops);
-- The counts by hour are made again from the calls, kept by triggers again.
DELETE FROM call_hours;
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
DROP TABLE call_text;
DROP TABLE call_counted;
DROP TABLE derived_marks;

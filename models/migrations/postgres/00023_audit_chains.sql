-- The audit log becomes several chains (ARCHITECTURE.md, "Several audit
-- chains"): each instance appends to a chain of its own, so instances no
-- longer wait for one head row. Each event names its chain, (chain, seq)
-- is the key, and each chain has a head of its own. What was written
-- before is chain 0, its events and hashes unchanged. A call remembers the
-- chain its events go to.

-- +goose Up
ALTER TABLE audit_events ADD COLUMN chain bigint NOT NULL DEFAULT 0;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_pkey;
ALTER TABLE audit_events ADD PRIMARY KEY (chain, seq);
ALTER TABLE audit_heads RENAME COLUMN id TO chain;
UPDATE audit_heads SET chain = 0 WHERE chain = 1;
ALTER TABLE tool_calls ADD COLUMN chain bigint NOT NULL DEFAULT 0;

-- +goose Down
-- Only a database with one chain goes back: with more, the key on seq
-- alone cannot be made and the step fails whole.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_pkey;
ALTER TABLE audit_events ADD PRIMARY KEY (seq);
ALTER TABLE audit_events DROP COLUMN chain;
UPDATE audit_heads SET chain = 1 WHERE chain = 0;
ALTER TABLE audit_heads RENAME COLUMN chain TO id;
ALTER TABLE tool_calls DROP COLUMN chain;

-- The shadow policy: calls on which it disagreed with the policy in force.

-- +goose Up
CREATE TABLE shadow_decisions (
    id bigserial PRIMARY KEY,
    tool_call_id varchar(40) NOT NULL,
    policy_version varchar(64),
    decided varchar(64),
    shadow varchar(64),
    created_at timestamptz
);
CREATE INDEX idx_shadow_decisions_version_created ON shadow_decisions (policy_version, created_at);
CREATE INDEX idx_shadow_decisions_tool_call_id ON shadow_decisions (tool_call_id);

-- +goose Down
DROP TABLE shadow_decisions;

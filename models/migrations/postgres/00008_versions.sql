-- What each call was made against and what each instance runs: a call
-- records its tool's definition hash (an approver sees when the tool
-- changed since), an instance the policy and tools versions it decides with
-- (several instances on different versions are shown to admins).

-- +goose Up
ALTER TABLE tool_calls ADD COLUMN tool_hash varchar(64) DEFAULT '';
ALTER TABLE instances ADD COLUMN policy_version varchar(64) DEFAULT '';
ALTER TABLE instances ADD COLUMN tools_version varchar(64) DEFAULT '';

-- +goose Down
ALTER TABLE instances DROP COLUMN tools_version;
ALTER TABLE instances DROP COLUMN policy_version;
ALTER TABLE tool_calls DROP COLUMN tool_hash;

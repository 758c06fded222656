-- An edited action keeps the strictest requirements of the rules its
-- original and edited arguments match: a passkey asked by the edit's rule.

-- +goose Up
ALTER TABLE tool_calls ADD COLUMN passkey_required boolean DEFAULT false;
-- +goose Down
ALTER TABLE tool_calls DROP COLUMN passkey_required;

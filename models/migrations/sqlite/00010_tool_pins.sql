-- Tool definitions pinned: the definition of each upstream MCP tool that a
-- person accepted (or the server's first listing). A definition that differs
-- is held at high_write until an admin accepts it on /tools.

-- +goose Up
CREATE TABLE `tool_pins` (`name` text,`upstream` text,`hash` text,`definition` text,`accepted_by` text,`accepted_at` datetime,PRIMARY KEY (`name`));
CREATE INDEX `idx_tool_pins_upstream` ON `tool_pins`(`upstream`);

-- +goose Down
DROP TABLE `tool_pins`;

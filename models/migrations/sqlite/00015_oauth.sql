-- OAuth 2.1 for /mcp: the clients, registered (RFC 7591) or named by the
-- URL of their metadata document (fetched and kept), which outside agent
-- each acts as once an admin authorized it, and the authorization
-- server's short-lived records (authorization requests, codes, access and
-- refresh tokens), kept here so that every instance of one database
-- honours what another issued.

-- +goose Up
CREATE TABLE `oauth_clients` (`id` text,`name` text,`redirect_uris` text,`client_uri` text,`created_at` datetime,`agent_id` text DEFAULT "",`authorized_by` text DEFAULT "",`authorized_at` datetime,`revoked_at` datetime,PRIMARY KEY (`id`));
CREATE TABLE `oauth_records` (`kind` text,`id` text,`client_id` text,`data` text,`expires_at` datetime,`created_at` datetime,PRIMARY KEY (`kind`,`id`));
CREATE INDEX `idx_oauth_records_client_id` ON `oauth_records`(`client_id`);
CREATE INDEX `idx_oauth_records_expires_at` ON `oauth_records`(`expires_at`);

-- +goose Down
DROP TABLE `oauth_records`;
DROP TABLE `oauth_clients`;

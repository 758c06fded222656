-- OAuth 2.1 for /mcp: the clients, registered (RFC 7591) or named by the
-- URL of their metadata document (fetched and kept), which outside agent
-- each acts as once an admin authorized it, and the authorization
-- server's short-lived records (authorization requests, codes, access and
-- refresh tokens), kept here so that every instance of one database
-- honours what another issued.

-- +goose Up
CREATE TABLE oauth_clients (
    id varchar(500) PRIMARY KEY,
    name varchar(200),
    redirect_uris text,
    client_uri varchar(500),
    created_at timestamptz,
    agent_id varchar(40) DEFAULT '',
    authorized_by varchar(64) DEFAULT '',
    authorized_at timestamptz,
    revoked_at timestamptz
);
CREATE TABLE oauth_records (
    kind varchar(16),
    id varchar(128),
    client_id varchar(500),
    data text,
    expires_at timestamptz,
    created_at timestamptz,
    PRIMARY KEY (kind, id)
);
CREATE INDEX idx_oauth_records_client_id ON oauth_records (client_id);
CREATE INDEX idx_oauth_records_expires_at ON oauth_records (expires_at);

-- +goose Down
DROP TABLE oauth_records;
DROP TABLE oauth_clients;

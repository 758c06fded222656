-- PostgreSQL's 00002 makes trigram indexes for the audit log's text search.
-- SQLite searches with LIKE over the rows it has; there is nothing to make.
-- The step is here so that both dialects number their migrations alike.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;

-- PostgreSQL's 00007 makes the table several instances share their rate
-- limits in. On SQLite one server keeps them in memory; there is nothing to
-- make. The step is here so that both dialects number their migrations alike.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;

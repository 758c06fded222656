-- Secrets every instance on one database must share but nobody gave: the
-- demo page's signing key and the chat grants' seed without a customer
-- secret. Made once, by whichever instance asks first.

-- +goose Up
CREATE TABLE `shared_secrets` (`name` text,`value` text NOT NULL,`created_at` datetime,PRIMARY KEY (`name`));

-- +goose Down
DROP TABLE `shared_secrets`;

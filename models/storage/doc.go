// Package storage keeps Countersign's records (package models, the words)
// in SQLite or PostgreSQL: opening and migrating the database (goose, one
// set of migrations per dialect), the single writer and its transactions,
// the audit chain, the text index, NOTIFY between instances, and every
// query, as named methods of Store and Tx. It is the only package that
// imports gorm or a database driver.
package storage

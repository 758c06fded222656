// Package migrations holds the versioned schema changes, one folder per
// dialect, applied in order by goose when a store opens.
package migrations

import "embed"

// SQLite and Postgres are the migrations of each dialect.
//
//go:embed sqlite/*.sql
var SQLite embed.FS

//go:embed postgres/*.sql
var Postgres embed.FS

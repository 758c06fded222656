package storage

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// dialect is what differs between SQLite and PostgreSQL in the SQL this
// package writes by hand. Everything else is written once, portably.
type dialect struct{ pg bool }

// IsPostgres says whether a --db value names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Shared says whether several instances may use the store at once (it is
// on PostgreSQL): what they share — run leases, heartbeats, notifications,
// rate limits — then lives in the database, not in one process. Callers
// ask this, not which dialect it is.
func (s *Store) Shared() bool { return s.d.pg }

// like is the case-insensitive LIKE: SQLite's LIKE is, PostgreSQL's is not.
func (d dialect) like() string {
	if d.pg {
		return "ILIKE"
	}
	return "LIKE"
}

// argScaled is a numeric top-level argument times scale, rounded half away
// from zero to a whole number (an integer in SQL): argScaled(col, 100) is
// a sum of dollars in cents. Sums of it are exact, as sums of floats are
// not (ten times 0.1 is 1). One placeholder: the argument's name (argKey).
func (d dialect) argScaled(col string, scale int) string {
	n := strconv.Itoa(scale)
	if d.pg {
		return "CAST(ROUND(CAST(" + col + "::jsonb ->> ? AS numeric) * " + n + ") AS bigint)"
	}
	return "CAST(ROUND(json_extract(" + col + ", ?) * " + n + ") AS INTEGER)"
}

// argKey is the placeholder's value for argScaled and argEquals.
func (d dialect) argKey(name string) string {
	if d.pg {
		return name
	}
	return "$." + name
}

// argEquals is SQL and its values for "the top-level argument name of the
// call equals v" (a string, number or bool).
func (d dialect) argEquals(col, name string, v any) (string, []any, error) {
	switch v.(type) {
	case bool, string, float64, int64, int:
	default:
		return "", nil, fmt.Errorf("argument %s is not a plain value", name)
	}
	if d.pg {
		// jsonb compares numbers as numbers (1 = 1.0) and strings exactly.
		raw, err := json.Marshal(v)
		if err != nil {
			return "", nil, err
		}
		return "(" + col + "::jsonb -> ?) = CAST(? AS jsonb)", []any{name, string(raw)}, nil
	}
	if b, ok := v.(bool); ok { // json_extract gives 1 or 0
		v = 0
		if b {
			v = 1
		}
	}
	return "json_extract(" + col + ", ?) = ?", []any{"$." + name, v}, nil
}

// rebound caches queries written with ? as PostgreSQL's $1, $2, ….
var rebound sync.Map

// rebind turns the ? placeholders of a query into $n for PostgreSQL
// (leaving any inside quotes alone); SQLite's queries are kept as written.
func (d dialect) rebind(query string) string {
	if !d.pg {
		return query
	}
	if q, ok := rebound.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	n, quoted := 0, false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	q := b.String()
	rebound.Store(query, q)
	return q
}

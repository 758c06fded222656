// Package views holds the templ components of Countersign's pages and every
// path they link to (paths.go). They take small view structs and only render:
// no queries, no HTTP.
package views

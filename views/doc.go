// Package views holds the templ components of Countersign's pages. They take
// small view structs and only render: no queries, no HTTP.
package views

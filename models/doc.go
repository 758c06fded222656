// Package models holds Countersign's database records, their migrations and
// every query, with the words they store: call and run statuses, staff roles,
// actors. It is the only package that imports gorm: the rest of the
// application speaks to the database through the Store's named methods.
package models

// Package models holds Countersign's words: the records a run, a call, an
// approval and an event are (plain structs), call and run statuses with
// their classes, staff roles, actors, money, event kinds and their
// payloads, the errors every layer speaks. It imports no database driver;
// the store that keeps these records is models/storage, the only package
// that imports gorm.
package models

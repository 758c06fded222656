package models

// ShadowCount is how often the shadow policy disagreed one way, with the
// latest calls it did.
type ShadowCount struct {
	Decided, Shadow string
	Count           int64
	Examples        []string `gorm:"-"` // call ids, newest first
}

package models

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"time"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a conditional state change found the record
// in another state than the one it expected (for example "already decided").
var ErrConflict = errors.New("conflict")

// ErrClosed is returned by Write after the store was closed.
var ErrClosed = errors.New("store is closed")

// The alphabet is in ASCII order so that ids sort by time.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewID returns a 128-bit identifier with a readable prefix, such as
// "call_aaq3k...": 48 bits of milliseconds then 80 random bits. The random
// part makes ids unguessable, so they can appear in URLs; the time part makes
// new rows land at the end of the primary-key index instead of all over it,
// which keeps each commit to a few pages.
func NewID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

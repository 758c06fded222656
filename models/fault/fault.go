// Package fault is the error type every layer shares: a code that says what
// kind of failure it is (the web layer maps codes to HTTP statuses in one
// place) and a message that is safe to show a user. It imports nothing of
// ours, so models, tools, agent and web may all use it.
package fault

import (
	"errors"
	"fmt"
)

// Code classifies an error for whoever shows it.
type Code string

// Error codes.
const (
	Invalid      Code = "invalid"
	NotFound     Code = "not_found"
	Conflict     Code = "conflict"
	Forbidden    Code = "forbidden"
	Unauthorized Code = "unauthorized"
	RateLimited  Code = "rate_limited"
	// Unavailable: something Countersign needs (the database) does not
	// answer now; the same request may work in a moment.
	Unavailable Code = "unavailable"
	Internal    Code = "internal"
)

// Error is an error with a code and a message that is safe to show a user.
type Error struct {
	Code    Code
	Message string
	Err     error // the cause, for logs; never shown
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap marks err as an internal failure, shown to the user as what failed.
func Wrap(err error, what string) *Error {
	return &Error{Code: Internal, Message: what, Err: err}
}

// CodeOf returns the code of err, Internal for errors without one.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Message returns the user-safe message of err.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "something went wrong on our side; it has been logged"
}

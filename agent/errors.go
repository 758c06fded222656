package agent

import (
	"errors"
	"fmt"
)

// Code classifies an error for whoever shows it: the web layer maps codes
// to HTTP statuses in one place.
type Code string

// Error codes.
const (
	CodeInvalid      Code = "invalid"
	CodeNotFound     Code = "not_found"
	CodeConflict     Code = "conflict"
	CodeForbidden    Code = "forbidden"
	CodeUnauthorized Code = "unauthorized"
	CodeInternal     Code = "internal"
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

func internal(err error, what string) *Error {
	return &Error{Code: CodeInternal, Message: what, Err: err}
}

// ErrorCode returns the code of err, CodeInternal for errors without one.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the user-safe message of err.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "something went wrong on our side; it has been logged"
}

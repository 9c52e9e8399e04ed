package belay

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a machine-readable error class. Every transport answers a Code with
// the same HTTP status (Code.HTTPStatus): /v1, tRPC and the dashboard.
type Code string

// Error codes, shared by every transport. They come from the seed specifications.
const (
	CodeValidation         Code = "VALIDATION_ERROR"
	CodeNotFound           Code = "NOT_FOUND"
	CodeCheckpointNotFound Code = "CHECKPOINT_NOT_FOUND"
	CodeSessionNotFound    Code = "SESSION_NOT_FOUND"
	CodeCheckpointExpired  Code = "CHECKPOINT_EXPIRED"
	CodeHITLNotRequired    Code = "HITL_NOT_REQUIRED"
	CodeHITLAlreadyDecided Code = "HITL_ALREADY_DECIDED"
	CodeInvalidOption      Code = "INVALID_OPTION"
	CodeRestoreFailed      Code = "RESTORE_FAILED"
	CodeUnauthorized       Code = "UNAUTHORIZED"
	CodeUnauthenticated    Code = "UNAUTHENTICATED"
	CodeRateLimited        Code = "RATE_LIMITED"
	CodeTimeout            Code = "TIMEOUT_ERROR"
	// CodeRequestTimeout: the client sent its request too slowly (its body
	// fell below the server's minimum rate); HTTP answers it with 408, where
	// TIMEOUT_ERROR (504) is the server's own slowness.
	CodeRequestTimeout    Code = "REQUEST_TIMEOUT"
	CodeCheckpointCorrupt Code = "CHECKPOINT_CORRUPTED"
	CodeConflict          Code = "CONFLICT"
	CodeLeaseLost         Code = "LEASE_LOST"
	CodeBudgetExceeded    Code = "BUDGET_EXCEEDED"
	CodeTooLarge          Code = "PAYLOAD_TOO_LARGE"
	CodeMethodNotAllowed  Code = "METHOD_NOT_ALLOWED"
	// CodeSchemaTooNew: the database was migrated by a newer belay; this
	// one refuses to run on it rather than misread it.
	CodeSchemaTooNew Code = "SCHEMA_TOO_NEW"
	CodeInternal     Code = "INTERNAL_ERROR"
	// CodeStorageUnavailable: the storage of the database or of the
	// workspace snapshots failed the request (disk full, read-only file
	// system, I/O error); it lasts until the storage is fixed. HTTP answers
	// it with 503.
	CodeStorageUnavailable Code = "STORAGE_UNAVAILABLE"
)

// statusByCode is the one table from error code to HTTP status.
var statusByCode = map[Code]int{
	CodeValidation:         http.StatusBadRequest,
	CodeNotFound:           http.StatusNotFound,
	CodeCheckpointNotFound: http.StatusNotFound,
	CodeSessionNotFound:    http.StatusNotFound,
	CodeCheckpointExpired:  http.StatusGone,
	CodeHITLNotRequired:    http.StatusBadRequest,
	CodeHITLAlreadyDecided: http.StatusConflict,
	CodeInvalidOption:      http.StatusBadRequest,
	CodeRestoreFailed:      http.StatusInternalServerError,
	CodeUnauthorized:       http.StatusForbidden,
	CodeUnauthenticated:    http.StatusUnauthorized,
	CodeRateLimited:        http.StatusTooManyRequests,
	CodeTimeout:            http.StatusGatewayTimeout,
	CodeRequestTimeout:     http.StatusRequestTimeout,
	CodeCheckpointCorrupt:  http.StatusUnprocessableEntity,
	CodeConflict:           http.StatusConflict,
	CodeLeaseLost:          http.StatusConflict,
	CodeBudgetExceeded:     http.StatusConflict,
	CodeTooLarge:           http.StatusRequestEntityTooLarge,
	CodeMethodNotAllowed:   http.StatusMethodNotAllowed,
	CodeInternal:           http.StatusInternalServerError,
	CodeStorageUnavailable: http.StatusServiceUnavailable,
}

// HTTPStatus returns the HTTP status an error of code c is answered with;
// 500 for a code that is the server's failure or unknown.
func (c Code) HTTPStatus() int {
	if st, ok := statusByCode[c]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// Error is the one error type of belay. Message is meant for a person; Details
// carries machine-readable context such as the offending field.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns a copy of e with one more detail set.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Details = make(map[string]any, len(e.Details)+1)
	for k, v := range e.Details {
		c.Details[k] = v
	}
	c.Details[key] = value
	return &c
}

// RetryAfter returns the seconds e says to wait before trying again
// (details.retryAfter, set on RATE_LIMITED), and whether it says so.
func (e *Error) RetryAfter() (int, bool) {
	after, ok := e.Details["retryAfter"].(int)
	return after, ok
}

// Invalid returns a VALIDATION_ERROR naming the field that is wrong.
func Invalid(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Code: CodeValidation, Message: msg, Details: map[string]any{"field": field, "error": msg}}
}

// ErrorCode returns the code of err, or INTERNAL_ERROR when err is not (and
// does not wrap) an *Error. It returns "" for a nil error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code Code) bool {
	return ErrorCode(err) == code
}

package store

import (
	"errors"

	"github.com/belayhq/belay"
)

// faultError is a storage fault: a STORAGE_UNAVAILABLE *belay.Error for
// callers, with the driver's or the OS's error kept for logs.
type faultError struct {
	public *belay.Error
	cause  error
}

func (e *faultError) Error() string   { return e.public.Error() + ": " + e.cause.Error() }
func (e *faultError) Unwrap() []error { return []error{e.public, e.cause} }

// Fault returns cause as a storage fault: STORAGE_UNAVAILABLE with message,
// written for the person reading it (what is wrong with the storage, never a
// path or an address), to callers, and cause to logs.
func Fault(message string, cause error) error {
	return &faultError{public: belay.Errorf(belay.CodeStorageUnavailable, "%s", message), cause: cause}
}

// IsFault reports whether err is, or wraps, an error Fault made.
func IsFault(err error) bool {
	var f *faultError
	return errors.As(err, &f)
}

package belay_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/belayhq/belay"
)

func TestErrorCode(t *testing.T) {
	notFound := belay.Errorf(belay.CodeSessionNotFound, "session %s not found", "x")
	for _, tc := range []struct {
		name string
		err  error
		want belay.Code
	}{
		{"Nil", nil, ""},
		{"Plain", io.EOF, belay.CodeInternal},
		{"Belay", notFound, belay.CodeSessionNotFound},
		{"Wrapped", fmt.Errorf("get: %w", notFound), belay.CodeSessionNotFound},
		{"WrappedTwice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", notFound)), belay.CodeSessionNotFound},
		{"Joined", errors.Join(io.EOF, notFound), belay.CodeSessionNotFound},
		{"WrappedPlain", fmt.Errorf("read: %w", io.EOF), belay.CodeInternal},
		{"Formatted", fmt.Errorf("not wrapped: %v", notFound), belay.CodeInternal},
		{"EmptyCode", &belay.Error{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := belay.ErrorCode(tc.err); got != tc.want {
				t.Errorf("ErrorCode(%v) = %q, want %q", tc.err, got, tc.want)
			}
			if tc.want != "" && !belay.IsCode(tc.err, tc.want) {
				t.Errorf("IsCode(%v, %s) = false", tc.err, tc.want)
			}
			if belay.IsCode(tc.err, belay.CodeRateLimited) {
				t.Errorf("IsCode(%v, %s) = true", tc.err, belay.CodeRateLimited)
			}
		})
	}
	if !belay.IsCode(nil, "") {
		t.Error(`IsCode(nil, "") = false; a nil error carries no code`)
	}
}

func TestErrorString(t *testing.T) {
	for _, tc := range []struct {
		err  *belay.Error
		want string
	}{
		{&belay.Error{Code: belay.CodeTimeout}, "TIMEOUT_ERROR"},
		{belay.Errorf(belay.CodeConflict, "session %s is %s", "s1", "completed"), "CONFLICT: session s1 is completed"},
		{belay.Errorf(belay.CodeInternal, "100%% done"), "INTERNAL_ERROR: 100% done"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestErrorWith(t *testing.T) {
	orig := belay.Errorf(belay.CodeCheckpointNotFound, "checkpoint not found")
	one := orig.With("id", "c1")
	two := one.With("seq", int64(3)).With("id", "c2")

	if orig.Details != nil {
		t.Errorf("With changed the original: %v", orig.Details)
	}
	if want := map[string]any{"id": "c1"}; !reflect.DeepEqual(one.Details, want) {
		t.Errorf("one.Details = %v, want %v (a later With must not change an earlier copy)", one.Details, want)
	}
	if want := map[string]any{"id": "c2", "seq": int64(3)}; !reflect.DeepEqual(two.Details, want) {
		t.Errorf("two.Details = %v, want %v", two.Details, want)
	}
	if two.Code != orig.Code || two.Message != orig.Message {
		t.Errorf("With changed code or message: %v", two)
	}
	if two == one || one == orig {
		t.Error("With returned the same *Error instead of a copy")
	}
}

func TestInvalid(t *testing.T) {
	err := belay.Invalid("summary", "summary must be %d-%d characters, got %d", 1, 500, 501)
	if err.Code != belay.CodeValidation {
		t.Errorf("code = %s, want %s", err.Code, belay.CodeValidation)
	}
	msg := "summary must be 1-500 characters, got 501"
	if want := map[string]any{"field": "summary", "error": msg}; err.Message != msg || !reflect.DeepEqual(err.Details, want) {
		t.Errorf("Invalid = %+v, want message %q and details %v", err, msg, want)
	}
	// Details of one error are not shared with another.
	withMore := err.With("limit", 500)
	if _, ok := err.Details["limit"]; ok || withMore.Details["field"] != "summary" {
		t.Errorf("With shares details: original %v, copy %v", err.Details, withMore.Details)
	}
}

// TestErrorJSON pins the wire shape of seed 003: code, message, details, the
// last left out when empty.
func TestErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		err  *belay.Error
		want string
	}{
		{belay.Errorf(belay.CodeRateLimited, "slow down"), `{"code":"RATE_LIMITED","message":"slow down"}`},
		{belay.Invalid("tags", "too many"), `{"code":"VALIDATION_ERROR","message":"too many","details":{"error":"too many","field":"tags"}}`},
	} {
		b, err := json.Marshal(tc.err)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("JSON = %s, want %s", b, tc.want)
		}
		var back belay.Error
		if err := json.Unmarshal(b, &back); err != nil || back.Code != tc.err.Code || back.Message != tc.err.Message {
			t.Errorf("round trip of %s = %+v, %v", b, back, err)
		}
	}
}

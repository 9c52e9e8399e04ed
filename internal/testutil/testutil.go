// Package testutil holds the assertions and helpers the tests of several
// packages share.
package testutil

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/belayhq/belay"
)

// WantCode fails the test unless err is a *belay.Error with code and, when
// a non-empty field is given, details.field naming it; it returns the error.
func WantCode(tb testing.TB, err error, code belay.Code, field ...string) *belay.Error {
	tb.Helper()
	var be *belay.Error
	if !errors.As(err, &be) {
		tb.Fatalf("error = %v (%T), want *belay.Error %s", err, err, code)
	}
	if be.Code != code {
		tb.Fatalf("error = %v (details %v), want code %s", be, be.Details, code)
	}
	if len(field) > 0 && field[0] != "" && be.Details["field"] != field[0] {
		tb.Fatalf("details.field = %v (%v), want %q", be.Details["field"], be, field[0])
	}
	return be
}

// FileSize returns the size of the file at path.
func FileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

// RPCReply is a JSON-RPC response as it comes over the wire, for tests of
// the MCP transports.
type RPCReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

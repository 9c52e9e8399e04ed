package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/belayhq/belay"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK's transports meet a payload that is not a JSON-RPC message badly:
// over stdio its reader ends the session, over HTTP it answers in plain text.
// JSON-RPC 2.0 asks for an error response instead, so belay checks each
// payload first and answers a bad one itself; only messages the SDK decodes
// reach it.

// rpcError is a JSON-RPC 2.0 error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcErrorObject  `json:"error"`
}

type rpcErrorObject struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func newRPCError(id json.RawMessage, code int64, msg string) *rpcError {
	if id == nil {
		id = json.RawMessage("null")
	}
	return &rpcError{JSONRPC: "2.0", ID: id, Error: rpcErrorObject{Code: code, Message: msg}}
}

// marshal is the error on one line.
func (e *rpcError) marshal() []byte {
	b, _ := json.Marshal(e) // strings and an id that was valid JSON cannot fail
	return append(b, '\n')
}

// checkPayload returns the error answering data, a payload of one transport
// frame, or nil when data is a JSON-RPC message or a batch of them (see
// decodePayload).
func checkPayload(data []byte) *rpcError {
	_, e := decodePayload(data)
	return e
}

// decodePayload returns the messages of data, a payload of one transport
// frame: one message or a batch of them. It answers a payload that is none
// with -32700 (parse error) for invalid JSON or -32600 (invalid request)
// for JSON that is not a message, with the request's id when it has a
// usable one.
func decodePayload(data []byte) ([]jsonrpc.Message, *rpcError) {
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		return nil, newRPCError(nil, jsonrpc.CodeParseError, "Parse error: "+err.Error())
	}
	data = bytes.TrimLeft(data, " \t\r\n")
	switch data[0] {
	case '{':
		m, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return nil, newRPCError(requestID(data), jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
		}
		if nullID(data) {
			return nil, newRPCError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an id must be a string or a number, not null")
		}
		return []jsonrpc.Message{m}, nil
	case '[':
		var batch []json.RawMessage
		if err := json.Unmarshal(data, &batch); err != nil || len(batch) == 0 {
			return nil, newRPCError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an empty batch")
		}
		msgs := make([]jsonrpc.Message, len(batch))
		for i, raw := range batch {
			m, err := jsonrpc.DecodeMessage(raw)
			if err != nil {
				return nil, newRPCError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: in a batch: "+err.Error())
			}
			msgs[i] = m
		}
		return msgs, nil
	}
	return nil, newRPCError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: a message must be a JSON object")
}

// nullID reports whether the message data has an id, and it is null: the
// SDK takes it for a notification's missing id, and answers in plain text.
func nullID(data []byte) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return false
	}
	id, ok := fields["id"]
	return ok && string(bytes.TrimSpace(id)) == "null"
}

// requestID is the id of an invalid request, when it is a string or a number
// (the ids JSON-RPC allows), or nil.
func requestID(data []byte) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return nil
	}
	id := fields["id"]
	if len(id) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return id
	}
	return nil
}

// checkBody answers a POST of JSON that is not a JSON-RPC message, another
// method or content type, with a JSON-RPC error (HTTP 400, 405 or 415) and
// passes every other request on to next.
func checkBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The endpoint is stateless: POST only, as the SDK answers, but with
		// a JSON-RPC error instead of its line of plain text.
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeRPCError(w, http.StatusMethodNotAllowed,
				newRPCError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: %s is not allowed on %s; allowed: POST", r.Method, r.URL.Path)))
			return
		}
		if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mediaType != "application/json" {
			writeRPCError(w, http.StatusUnsupportedMediaType,
				newRPCError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: Content-Type must be application/json"))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, belay.MaxBodyBytes+1))
		var coded *belay.Error
		switch {
		case errors.As(err, &coded): // the body's own: REQUEST_TIMEOUT
			writeRPCError(w, coded.Code.HTTPStatus(), newRPCError(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: "+coded.Message))
			return
		case err != nil:
			// Unreadable: the SDK reads it again and answers as it does.
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			next.ServeHTTP(w, r)
			return
		case len(body) > belay.MaxBodyBytes:
			writeRPCError(w, http.StatusRequestEntityTooLarge,
				newRPCError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a body over %d bytes", belay.MaxBodyBytes)))
			return
		}
		if e := checkPayload(body); e != nil {
			writeRPCError(w, http.StatusBadRequest, e)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// writeRPCError answers an HTTP request with e, with status.
func writeRPCError(w http.ResponseWriter, status int, e *rpcError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(e.marshal())
}

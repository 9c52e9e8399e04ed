// Package mcpserver serves belay to coding agents over the Model Context
// Protocol: seed 003's tools (checkpoint_save, checkpoint_search,
// checkpoint_list) and belay's own (get, diff, rollback, resume, ask a
// human). It translates between MCP and belay.Service and holds no rules;
// the same service backs stdio (`belay mcp`) and streamable HTTP (/mcp).
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayhq/belay"
)

// Timeout bounds one tool call (seed 003's 30 s).
const Timeout = 30 * time.Second

// Options configure a server.
type Options struct {
	// Service is what the tools call.
	Service belay.Service
	// Version is reported to clients.
	Version string
	// Timeout bounds one tool call; Timeout when zero.
	Timeout time.Duration
	// MaxAskWait bounds how long ask_human and hitl_wait wait for a decision
	// within one call; 25 s when zero (under the call timeout).
	MaxAskWait time.Duration
}

// server is one MCP server's tools on a service.
type server struct {
	svc     belay.Service
	timeout time.Duration
	askWait time.Duration
}

// New returns an MCP server with belay's tools. Callers' identity comes from
// each call's context (see HTTPHandler for HTTP).
func New(opts Options) *mcp.Server {
	s := &server{svc: opts.Service, timeout: opts.Timeout, askWait: opts.MaxAskWait}
	if s.timeout == 0 {
		s.timeout = Timeout
	}
	if s.askWait == 0 {
		s.askWait = 25 * time.Second
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "belay", Title: "belay: checkpoints, rollback and human decisions", Version: opts.Version},
		&mcp.ServerOptions{Instructions: instructions})
	for _, t := range s.tools() {
		srv.AddTool(t.tool, t.handler)
	}
	return srv
}

const instructions = `belay keeps checkpoints of your work: a snapshot of the project's files and your notes.
Save a checkpoint (checkpoint_save) after each meaningful step and before anything risky.
Find earlier work with checkpoint_search or checkpoint_list; see what changed with checkpoint_diff;
undo a mistake with checkpoint_rollback (try dry_run first). Ask a person before irreversible
steps with ask_human. Errors come back as JSON {"error":{"code","message","details"}}: read
details.field to fix the input.`

// HTTPHandler serves the server over streamable HTTP. Mount it behind
// authentication that puts the caller in the request's context
// (httpapi.Server.Handle does): each request's identity reaches its tool calls.
// A body that is not a JSON-RPC message is answered with a JSON-RPC error
// (-32700 or -32600, HTTP 400), and one over belay.MaxBodyBytes with -32600
// (HTTP 413).
func HTTPHandler(srv *mcp.Server) http.Handler {
	return checkBody(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: belay.MaxBodyBytes}))
}

// tool is one tool with its handler.
type tool struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// typed makes a tool whose input decodes strictly into In and whose output is
// Out, with schemas inferred from the types and then shaped by schema (limits,
// required fields). Errors become seed 003's JSON error as a tool error.
func typed[In, Out any](s *server, name, desc string, shape func(in *jsonschema.Schema), run func(ctx context.Context, in *In) (*Out, error)) tool {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: input schema: %v", name, err))
	}
	shape(in)
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: output schema: %v", name, err))
	}
	h := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		var args In
		if err := decodeArgs(req.Params.Arguments, &args); err != nil {
			return errorResult(err), nil
		}
		res, err := run(ctx, &args)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = belay.Errorf(belay.CodeTimeout, "operation exceeded timeout").
					With("timeout", s.timeout.String()).With("elapsed", time.Since(start).Round(100*time.Millisecond).String())
			}
			return errorResult(err), nil
		}
		b, err := json.Marshal(res)
		if err != nil {
			return errorResult(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
	}
	return tool{tool: &mcp.Tool{Name: name, Description: desc, InputSchema: in, OutputSchema: out}, handler: h}
}

// decodeArgs reads a tool's arguments into dst, refusing unknown fields and
// wrong types with a VALIDATION_ERROR naming the field.
func decodeArgs(raw json.RawMessage, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return belay.Invalid(typ.Field, "%s must be %s, got %s", typ.Field, belay.JSONKind(typ.Type), typ.Value)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			field := strings.Trim(name, `"`)
			return belay.Invalid(field, "unknown field %s", name)
		}
		return belay.Invalid("arguments", "arguments must be a JSON object: %v", err)
	}
	return belay.InvalidUTF8(raw, dst)
}

// codeByCode is the one table from belay's codes to the codes MCP clients
// see: seed 003 speaks of NOT_FOUND for any missing record.
var codeByCode = map[belay.Code]belay.Code{
	belay.CodeCheckpointNotFound: belay.CodeNotFound,
	belay.CodeSessionNotFound:    belay.CodeNotFound,
}

// errorResult is seed 003's error object as a tool error. An error without a
// code is an internal error, its text not shown — but for a service behind
// HTTP (`belay mcp` with BELAY_URL) that cannot be reached: the agent, and
// the person reading its log, learn why.
func errorResult(err error) *mcp.CallToolResult {
	var be *belay.Error
	var ue *url.Error
	switch {
	case errors.As(err, &be):
	case errors.As(err, &ue):
		be = belay.Errorf(belay.CodeStorageUnavailable, "cannot reach the belay server at %s: %v", ue.URL, ue.Err)
	default:
		be = belay.Errorf(belay.CodeInternal, "internal error")
	}
	out := *be
	if c, ok := codeByCode[out.Code]; ok {
		out.Code = c
	}
	b, _ := json.Marshal(map[string]any{"error": out})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

// limits sets string and array bounds and required fields on a schema.
type limits struct {
	maxLen   map[string]int
	maxItems map[string]int
	min, max map[string]float64
	enum     map[string][]any
	required []string
}

func (l limits) apply(s *jsonschema.Schema) {
	for name, n := range l.maxLen {
		s.Properties[name].MaxLength = &n
	}
	for name, n := range l.maxItems {
		s.Properties[name].MaxItems = &n
	}
	for name, v := range l.min {
		s.Properties[name].Minimum = &v
	}
	for name, v := range l.max {
		s.Properties[name].Maximum = &v
	}
	for name, v := range l.enum {
		s.Properties[name].Enum = v
	}
	s.Required = l.required
}

// Package trpc speaks tRPC's wire protocol (v11) for seed 000's router, so a
// TypeScript app using @trpc/client works against belay unchanged: queries
// and mutations over HTTP (httpLink, httpBatchLink), subscriptions over
// Server-Sent Events (httpSubscriptionLink) and WebSocket (wsLink), with
// plain JSON or the superjson transformer. It translates between tRPC and
// belay.Service and holds no rules. A batch is bounded in calls
// (maxBatchCalls, as tRPC's maxBatchSize), in calls running at once
// (batchConcurrency) and in the bytes of its answer (batchBytes).
package trpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayhq/belay"
)

// Options configure a handler.
type Options struct {
	Service belay.Service
	// Authenticate maps a bearer token (Authorization header, or the token
	// in connectionParams) to an identity.
	Authenticate func(ctx context.Context, token string) (belay.Actor, error)
	// SuperJSON selects the superjson transformer instead of plain JSON.
	SuperJSON bool
	Logger    *slog.Logger
	// Timeout bounds one query or mutation; 30 s when zero.
	Timeout time.Duration
	// Ping is the interval of keep-alive pings on subscriptions; 15 s when zero.
	Ping time.Duration
}

// maxBody bounds a request body, as on every transport.
const maxBody = belay.MaxBodyBytes

// Bounds of a batch: what one request may make the server do and hold.
const (
	// maxBatchCalls is the most calls a batch may hold, as tRPC's
	// maxBatchSize option: a longer batch is answered as tRPC answers it
	// (400 BAD_REQUEST, "Batch call exceeds maximum size") and none of its
	// calls runs. httpBatchLink's maxItems option keeps a client's batches
	// under it.
	maxBatchCalls = 50
	// batchConcurrency is how many of a batch's calls run at once; the
	// others wait their turn, in order.
	batchConcurrency = 4
	// batchBytes is what a batch's encoded results may reach, as a list
	// page's. Once the results of the calls run so far reach it, each call
	// not yet started is answered PAYLOAD_TOO_LARGE (413 in its slot)
	// instead of running, so a batch holds at most batchBytes plus the
	// results of the calls under way, not the sum of all its results.
	batchBytes = belay.MaxPageBytes
	// wsCallsInFlight is how many queries and mutations one WebSocket
	// connection may have running at once, and wsSubscriptions how many
	// subscriptions it may hold.
	wsCallsInFlight = 16
	wsSubscriptions = 100
)

// Handler serves the router under prefix (e.g. "/trpc/").
type Handler struct {
	opts   Options
	prefix string
	tr     transformer
}

// New returns a handler for requests under prefix.
func New(prefix string, opts Options) *Handler {
	h := &Handler{opts: opts, prefix: prefix, tr: plain{}}
	if opts.SuperJSON {
		h.tr = superJSON{}
	}
	if h.opts.Logger == nil {
		h.opts.Logger = slog.Default()
	}
	if h.opts.Timeout == 0 {
		h.opts.Timeout = 30 * time.Second
	}
	if h.opts.Ping == 0 {
		h.opts.Ping = 15 * time.Second
	}
	return h
}

// call is one procedure call of a request.
type call struct {
	path  string
	input json.RawMessage
}

// response is a call's answer before it is encoded.
type response struct {
	data   any
	err    *errorShape
	status int
}

// answer is a call's answer encoded: its envelope, its HTTP status and the
// seconds its error says to wait before trying again.
type answer struct {
	envelope   json.RawMessage
	status     int
	retryAfter int
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "" {
		h.serveWS(w, r)
		return
	}
	paths := strings.TrimPrefix(r.URL.Path, h.prefix)
	batch := r.URL.Query().Get("batch") == "1"
	calls, perr := h.calls(r, paths, batch)
	if perr != nil {
		// As tRPC does, an error of the request itself is one envelope,
		// batch or not: httpBatchLink gives it to each of the batch's calls.
		h.writeOne(w, response{err: perr, status: perr.Data.HTTPStatus})
		return
	}
	ctx, authErr := h.identify(r)
	if len(calls) == 1 && !batch {
		if p, ok := procedures[calls[0].path]; ok && p.kind == subscription && authErr == nil {
			h.serveSSE(ctx, w, r, calls[0], p)
			return
		}
	}
	h.write(w, batch, h.runBatch(ctx, r.Method, calls, batch, authErr))
}

// runBatch answers a request's calls, batchConcurrency at a time in order
// (tRPC runs them all at once). A call that would start once the answers
// so far reach batchBytes is answered PAYLOAD_TOO_LARGE instead: the
// answers only grow, so those calls are the batch's last ones.
func (h *Handler) runBatch(ctx context.Context, method string, calls []call, batch bool, authErr error) []answer {
	out := make([]answer, len(calls))
	turns := make(chan struct{}, batchConcurrency)
	var used atomic.Int64
	var wg sync.WaitGroup
	for i, c := range calls {
		if authErr != nil {
			e := shape(h.opts.Logger, c.path, authErr)
			out[i] = h.encode(response{err: &e, status: e.Data.HTTPStatus})
			continue
		}
		turns <- struct{}{}
		if used.Load() >= batchBytes {
			<-turns
			e := protocolError(tooLarge, fmt.Sprintf("this batch's results passed %d MiB before this call ran: ask for it in a smaller batch", batchBytes>>20), c.path)
			out[i] = h.encode(response{err: &e, status: e.Data.HTTPStatus})
			continue
		}
		wg.Go(func() {
			defer func() { <-turns }()
			out[i] = h.encode(h.run(ctx, method, c, batch))
			used.Add(int64(len(out[i].envelope)))
		})
	}
	wg.Wait()
	return out
}

// calls reads the request's calls and their inputs.
func (h *Handler) calls(r *http.Request, paths string, batch bool) ([]call, *errorShape) {
	names := []string{paths}
	if batch {
		if strings.Count(paths, ",") >= maxBatchCalls {
			e := tooManyCalls()
			return nil, &e
		}
		names = strings.Split(paths, ",")
	}
	var raw []byte
	switch r.Method {
	case http.MethodGet:
		raw = []byte(r.URL.Query().Get("input"))
	case http.MethodPost:
		b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
		var coded *belay.Error
		switch {
		case errors.As(err, &coded): // the body's own: REQUEST_TIMEOUT
			e := shape(h.opts.Logger, paths, coded)
			return nil, &e
		case err != nil:
			e := protocolError(tooLarge, fmt.Sprintf("the request body is over %d bytes", maxBody), paths)
			return nil, &e
		}
		raw = b
	default:
		e := protocolError(notSupported, "tRPC takes GET and POST requests", paths)
		return nil, &e
	}
	calls := make([]call, len(names))
	for i, n := range names {
		calls[i].path = n
	}
	if len(raw) == 0 {
		return calls, nil
	}
	if !batch {
		calls[0].input = raw
		return h.untransform(calls, paths)
	}
	var inputs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &inputs); err != nil {
		e := protocolError(badRequest, `"input" needs to be an object when doing a batch call`, paths)
		return nil, &e
	}
	for i := range calls {
		calls[i].input = inputs[fmt.Sprint(i)]
	}
	return h.untransform(calls, paths)
}

// untransform decodes each input through the transformer.
func (h *Handler) untransform(calls []call, paths string) ([]call, *errorShape) {
	for i, c := range calls {
		if c.input == nil {
			continue
		}
		if !json.Valid(c.input) {
			e := protocolError(parseError, "the input is not valid JSON", c.path)
			return nil, &e
		}
		in, err := h.tr.input(c.input)
		if err != nil {
			e := protocolError(parseError, "the input is not in the transformer's format: "+err.Error(), c.path)
			return nil, &e
		}
		calls[i].input = in
	}
	return calls, nil
}

// identify authenticates the request (see bearer).
func (h *Handler) identify(r *http.Request) (context.Context, error) {
	return h.authenticate(r.Context(), bearer(r))
}

// bearer is the request's token: the Authorization header's, else the one
// in the connectionParams query parameter (httpSubscriptionLink).
func bearer(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		scheme, t, _ := strings.Cut(a, " ")
		if strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(t)
		}
		return ""
	}
	var params struct {
		Token string `json:"token"`
	}
	if cp := r.URL.Query().Get("connectionParams"); cp != "" && json.Unmarshal([]byte(cp), &params) == nil {
		return params.Token
	}
	return ""
}

func (h *Handler) authenticate(ctx context.Context, token string) (context.Context, error) {
	if h.opts.Authenticate == nil {
		return ctx, belay.Errorf(belay.CodeUnauthenticated, "this server accepts no tokens")
	}
	a, err := h.opts.Authenticate(ctx, token)
	if err != nil {
		return ctx, err
	}
	return belay.WithActor(ctx, a), nil
}

// run answers one query or mutation.
func (h *Handler) run(ctx context.Context, method string, c call, batch bool) response {
	p, ok := procedures[c.path]
	fail := func(e errorShape) response { return response{err: &e, status: e.Data.HTTPStatus} }
	switch {
	case !ok:
		return fail(protocolError(notFound, fmt.Sprintf("No procedure found on path %q", c.path), c.path))
	case p.kind == subscription && batch:
		return fail(protocolError(badRequest, "Cannot batch subscription calls", c.path))
	case p.kind == subscription:
		return fail(protocolError(notSupported, "subscriptions are served over Server-Sent Events (GET) and WebSocket", c.path))
	case p.kind == mutation && method != http.MethodPost:
		return fail(protocolError(notSupported, fmt.Sprintf("Unsupported %s-request to mutation procedure at path %q", method, c.path), c.path))
	}
	ctx, cancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer cancel()
	out, err := p.call(ctx, h.opts.Service, c.input)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = belay.Errorf(belay.CodeTimeout, "%s took longer than %s", c.path, h.opts.Timeout)
		}
		return fail(shape(h.opts.Logger, c.path, err))
	}
	return response{data: out, status: http.StatusOK}
}

// tooManyCalls is tRPC's answer to a batch of more than maxBatchCalls
// calls, with the bound in details.max.
func tooManyCalls() errorShape {
	e := protocolError(badRequest, "Batch call exceeds maximum size", "")
	e.Data.Details = map[string]any{"max": maxBatchCalls}
	return e
}

// encode encodes a call's answer; one that cannot be encoded is logged and
// answered as an internal error.
func (h *Handler) encode(o response) answer {
	env, err := h.envelope(o)
	if err != nil {
		h.opts.Logger.Error("trpc encode", "error", err)
		e := protocolError(internal, "internal error", "")
		env, _ = h.envelope(response{err: &e})
		return answer{envelope: env, status: http.StatusInternalServerError}
	}
	a := answer{envelope: env, status: o.status}
	if o.err != nil {
		a.retryAfter = o.err.retryAfter
	}
	return a
}

// writeOne sends the answer of a request that is no batch.
func (h *Handler) writeOne(w http.ResponseWriter, o response) {
	h.write(w, false, []answer{h.encode(o)})
}

// write sends the answers: one envelope, or an array for a batch, whose
// status is the calls' common status, or 207 when they differ; refused
// whole, with the longest wait any says (Retry-After). The envelopes are
// written one by one, never copied into one buffer.
func (h *Handler) write(w http.ResponseWriter, batch bool, out []answer) {
	status, after := out[0].status, 0
	for _, o := range out {
		if o.status != status {
			status = http.StatusMultiStatus
		}
		after = max(after, o.retryAfter)
	}
	if status != http.StatusMultiStatus && after > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(after))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", "trpc-accept")
	w.WriteHeader(status)
	if !batch {
		_, _ = w.Write(out[0].envelope)
		return
	}
	sep := []byte("[")
	for _, o := range out {
		if _, err := w.Write(sep); err != nil {
			return
		}
		if _, err := w.Write(o.envelope); err != nil {
			return
		}
		sep = []byte(",")
	}
	_, _ = w.Write([]byte("]"))
}

// envelope is {"result":{"data":…}} or {"error":…}, through the transformer.
func (h *Handler) envelope(o response) (json.RawMessage, error) {
	if o.err != nil {
		e, err := h.marshal(o.err)
		if err != nil {
			return nil, err
		}
		return slices.Concat([]byte(`{"error":`), e, []byte(`}`)), nil
	}
	d, err := h.marshal(o.data)
	if err != nil {
		return nil, err
	}
	return slices.Concat([]byte(`{"result":{"data":`), d, []byte(`}}`)), nil
}

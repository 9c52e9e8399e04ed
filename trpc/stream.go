package trpc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// writeTimeout is how long a stream waits for a slow client.
const writeTimeout = 10 * time.Second

// serveSSE serves a subscription as tRPC's Server-Sent Events: "connected"
// first, then each value (with its id when it has one), "ping" while idle,
// "serialized-error" when the stream fails and "return" when it ends. An
// error before the subscription is accepted is answered as JSON.
func (h *Handler) serveSSE(ctx context.Context, w http.ResponseWriter, r *http.Request, c call, p procedure) {
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	started := false
	frame := func(event, data, id string) error {
		mu.Lock()
		defer mu.Unlock()
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		var err error
		if event != "" {
			_, err = fmt.Fprintf(w, "event: %s\n", event)
		}
		if err == nil {
			_, err = fmt.Fprintf(w, "data: %s\n", data)
		}
		if err == nil && id != "" {
			_, err = fmt.Fprintf(w, "id: %s\n", id)
		}
		if err == nil {
			_, err = fmt.Fprint(w, "\n\n")
		}
		if err == nil {
			err = rc.Flush()
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := sink{
		ready: func() error {
			mu.Lock()
			if started {
				mu.Unlock()
				return nil
			}
			started = true
			hd := w.Header()
			hd.Set("Content-Type", "text/event-stream")
			hd.Set("Cache-Control", "no-cache, no-transform")
			hd.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			mu.Unlock()
			if err := frame("connected", "{}", ""); err != nil {
				return err
			}
			go h.ping(ctx, func() error { return frame("ping", "", "") })
			return nil
		},
		emit: func(id string, v any) error {
			b, err := h.marshal(v)
			if err != nil {
				return err
			}
			return frame("", string(b), id)
		},
	}
	err := p.subscribe(ctx, h.opts.Service, c.input, r.Header.Get("Last-Event-ID"), out)
	mu.Lock()
	opened := started
	mu.Unlock()
	switch {
	case !opened && err != nil:
		e := shape(h.opts.Logger, c.path, err)
		h.writeOne(w, response{err: &e, status: e.Data.HTTPStatus})
	case !opened:
		h.writeOne(w, response{data: nil, status: http.StatusOK})
	case err != nil && r.Context().Err() == nil:
		e := shape(h.opts.Logger, c.path, err)
		if b, merr := h.marshal(e); merr == nil {
			_ = frame("serialized-error", string(b), "")
		}
	case r.Context().Err() == nil:
		_ = frame("return", "", "")
	}
}

// ping calls send every Ping interval until ctx ends or send fails.
func (h *Handler) ping(ctx context.Context, send func() error) {
	t := time.NewTicker(h.opts.Ping)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if send() != nil {
				return
			}
		}
	}
}

// marshal encodes a value through the transformer.
func (h *Handler) marshal(v any) (json.RawMessage, error) {
	return h.tr.output(v)
}

// wsMessage is a client's WebSocket message (tRPC's TRPCClientOutgoingMessage
// or the connectionParams message).
type wsMessage struct {
	ID      json.RawMessage `json:"id"`
	JSONRPC string          `json:"jsonrpc,omitempty"`
	Method  string          `json:"method"`
	Params  struct {
		Path        string          `json:"path"`
		Input       json.RawMessage `json:"input"`
		LastEventID string          `json:"lastEventId,omitempty"`
	} `json:"params"`
	Data json.RawMessage `json:"data"`
}

// serveWS serves tRPC's WebSocket protocol: connectionParams (carrying the
// token) first when the URL asks for them, then queries, mutations and
// subscriptions by id, subscription.stop, and PING/PONG keep-alive.
func (h *Handler) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(maxBody)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wmu sync.Mutex
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		wmu.Lock()
		defer wmu.Unlock()
		wctx, c := context.WithTimeout(ctx, writeTimeout)
		defer c()
		return conn.Write(wctx, websocket.MessageText, b)
	}
	respond := func(id json.RawMessage, rpc string, result any, e *errorShape) {
		msg := map[string]any{"id": id}
		if rpc != "" {
			msg["jsonrpc"] = rpc
		}
		if e != nil {
			b, merr := h.marshal(e)
			if merr != nil {
				return
			}
			msg["error"] = b
		} else {
			msg["result"] = result
		}
		_ = send(msg)
	}
	// The token is checked again for every call, not only when the
	// connection opens: a revoked token's connection can do no more.
	token := ""
	waitParams := r.URL.Query().Get("connectionParams") == "1"
	if !waitParams {
		token = bearer(r)
	}
	subs := map[string]context.CancelFunc{}
	var smu sync.Mutex
	var wg sync.WaitGroup
	// A client that sends calls faster than it reads their answers gets
	// TOO_MANY_REQUESTS past wsCallsInFlight, not a goroutine per call
	// without bound; the reader never blocks, so PING and
	// subscription.stop are always read.
	inFlight := make(chan struct{}, wsCallsInFlight)
	defer func() {
		cancel()
		wg.Wait()
	}()
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ == websocket.MessageText && string(data) == "PING" {
			wmu.Lock()
			_ = conn.Write(ctx, websocket.MessageText, []byte("PONG"))
			wmu.Unlock()
			continue
		}
		if waitParams {
			waitParams = false
			var m wsMessage
			var params struct {
				Token string `json:"token"`
			}
			if json.Unmarshal(data, &m) != nil || m.Method != "connectionParams" || json.Unmarshal(m.Data, &params) != nil {
				e := protocolError(parseError, "Malformed TRPCConnectionParamsMessage", "")
				respond(json.RawMessage("null"), "", nil, &e)
				return
			}
			token = params.Token
			continue
		}
		var msgs []wsMessage
		if err := json.Unmarshal(data, &msgs); err != nil {
			var one wsMessage
			if err := json.Unmarshal(data, &one); err != nil {
				e := protocolError(parseError, "the message is not JSON", "")
				respond(json.RawMessage("null"), "", nil, &e)
				continue
			}
			msgs = []wsMessage{one}
		} else if len(msgs) > maxBatchCalls {
			// As tRPC does: no call of the batch runs, and each gets the
			// error, so no client waits for an answer forever.
			e := tooManyCalls()
			answered := false
			for _, m := range msgs {
				if m.Method != "subscription.stop" && len(m.ID) > 0 && string(m.ID) != "null" {
					respond(m.ID, m.JSONRPC, nil, &e)
					answered = true
				}
			}
			if !answered {
				respond(json.RawMessage("null"), "", nil, &e)
			}
			continue
		}
		for _, m := range msgs {
			key := string(m.ID)
			if m.Method == "subscription.stop" {
				smu.Lock()
				if stop, ok := subs[key]; ok {
					stop()
				}
				smu.Unlock()
				continue
			}
			authed, authErr := h.authenticate(ctx, token)
			if authErr != nil {
				e := shape(h.opts.Logger, m.Params.Path, authErr)
				respond(m.ID, m.JSONRPC, nil, &e)
				continue
			}
			in, perr := h.untransform([]call{{path: m.Params.Path, input: m.Params.Input}}, m.Params.Path)
			if perr != nil {
				respond(m.ID, m.JSONRPC, nil, perr)
				continue
			}
			p, ok := procedures[m.Params.Path]
			if !ok || string(p.kind) != m.Method {
				e := protocolError(notFound, fmt.Sprintf("No %s procedure found on path %q", m.Method, m.Params.Path), m.Params.Path)
				respond(m.ID, m.JSONRPC, nil, &e)
				continue
			}
			if p.kind != subscription {
				select {
				case inFlight <- struct{}{}:
				default:
					e := protocolError(tooMany, fmt.Sprintf("more than %d calls are running on this connection: wait for their answers", wsCallsInFlight), m.Params.Path)
					respond(m.ID, m.JSONRPC, nil, &e)
					continue
				}
				wg.Go(func() {
					defer func() { <-inFlight }()
					method := http.MethodGet
					if p.kind == mutation {
						method = http.MethodPost
					}
					res := h.run(authed, method, in[0], false)
					if res.err != nil {
						respond(m.ID, m.JSONRPC, nil, res.err)
						return
					}
					b, err := h.marshal(res.data)
					if err != nil {
						e := protocolError(internal, "internal error", m.Params.Path)
						respond(m.ID, m.JSONRPC, nil, &e)
						return
					}
					respond(m.ID, m.JSONRPC, map[string]any{"type": "data", "data": b}, nil)
				})
				continue
			}
			sctx, stop := context.WithCancel(authed)
			smu.Lock()
			if len(subs) >= wsSubscriptions {
				smu.Unlock()
				stop()
				e := protocolError(tooMany, fmt.Sprintf("this connection has %d subscriptions, the most it may: stop one first", wsSubscriptions), m.Params.Path)
				respond(m.ID, m.JSONRPC, nil, &e)
				continue
			}
			if _, dup := subs[key]; dup {
				smu.Unlock()
				stop()
				e := protocolError(badRequest, "Duplicate id "+key, m.Params.Path)
				respond(m.ID, m.JSONRPC, nil, &e)
				continue
			}
			subs[key] = stop
			smu.Unlock()
			wg.Go(func() {
				defer stop()
				once := sync.Once{}
				out := sink{
					ready: func() error {
						once.Do(func() { respond(m.ID, m.JSONRPC, map[string]any{"type": "started"}, nil) })
						return nil
					},
					emit: func(id string, v any) error {
						// A value with an id reaches the client as {id, data},
						// as tRPC's tracked() values do over SSE too.
						if id != "" {
							v = map[string]any{"id": id, "data": v}
						}
						b, err := h.marshal(v)
						if err != nil {
							return err
						}
						res := map[string]any{"type": "data", "data": b}
						if id != "" {
							res["id"] = id
						}
						respond(m.ID, m.JSONRPC, res, nil)
						return nil
					},
				}
				err := p.subscribe(sctx, h.opts.Service, in[0].input, m.Params.LastEventID, out)
				// The client hears it ended while its id is still held, and
				// the id is free once it has: a subscription that reuses the
				// id at once is never answered before this one's end, and
				// finds room.
				smu.Lock()
				defer smu.Unlock()
				switch {
				case err != nil && sctx.Err() == nil:
					e := shape(h.opts.Logger, m.Params.Path, err)
					respond(m.ID, m.JSONRPC, nil, &e)
				case ctx.Err() == nil:
					respond(m.ID, m.JSONRPC, map[string]any{"type": "stopped"}, nil)
				}
				delete(subs, key)
			})
		}
	}
}

package graph

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/belayhq/belay"
)

// TokenEvent is the name of the custom events that carry a model's output
// text, a piece at a time (see EmitToken). The event log of the run's
// session coalesces them.
const TokenEvent = "token"

// EmitToken emits text a node produced (a model's token) as a custom event
// named TokenEvent, like Emit. A stream's consumer gets every token; the
// run's event log gets them coalesced, a graph.tokens event per node per
// TokenFlushInterval (or per MaxTokenBatch bytes of text), so a fast model
// cannot flood the log.
func EmitToken(ctx context.Context, text string) bool {
	return Emit(ctx, TokenEvent, text)
}

// How the event log is written: every TokenFlushInterval, the events a run
// produced since are appended in one call; the tokens of a node in that
// time become one graph.tokens event, or several of at most MaxTokenBatch
// bytes of text each.
const (
	TokenFlushInterval = 50 * time.Millisecond
	MaxTokenBatch      = 16 << 10
)

// eventLog writes a run's events to the event log of its session
// (belay.EventService.AppendEvents): in the background every
// TokenFlushInterval while the run goes on, and all that is left when it
// stops. Records keep the order the run produced them in.
type eventLog struct {
	svc belay.Service
	id  string
	// ctx is the run's, without its cancellation: the caller's identity.
	ctx context.Context

	mu     sync.Mutex
	queue  []*logRecord
	tokens map[string]*logRecord // the open token batch of each node
	err    error                 // the first append that failed

	flushing sync.Mutex // one append at a time, in order
	stopc    chan struct{}
	done     chan struct{}
}

// logRecord is one event to append. A token batch grows in text until it
// is closed; a node_end waits for its checkpoint (ref) when the save is
// deferred.
type logRecord struct {
	typ string
	cp  string
	ref *checkpointRef
	raw json.RawMessage
	// data, text and n are a token batch's, encoded when it is appended.
	data map[string]any
	text strings.Builder
	n    int
}

// checkpointRef is the id of a step's checkpoint, known once it is saved
// ("" when it never is: an exit-durability step another replaced).
type checkpointRef struct {
	once sync.Once
	done chan struct{}
	id   string
}

func newCheckpointRef() *checkpointRef { return &checkpointRef{done: make(chan struct{})} }

func (c *checkpointRef) resolve(id string) {
	if c == nil {
		return
	}
	c.once.Do(func() {
		c.id = id
		close(c.done)
	})
}

func newEventLog(ctx context.Context, svc belay.Service, id string) *eventLog {
	l := &eventLog{svc: svc, id: id, ctx: context.WithoutCancel(ctx), tokens: map[string]*logRecord{}, stopc: make(chan struct{}), done: make(chan struct{})}
	go l.tick()
	return l
}

func (l *eventLog) tick() {
	defer close(l.done)
	t := time.NewTicker(TokenFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopc:
			return
		case <-t.C:
			l.flush(l.ctx)
		}
	}
}

// add queues an event of the run about node, with data, and the
// checkpoint cp or the one ref will name. A node's other events close its
// open token batch, so its text stays where it was emitted.
func (l *eventLog) add(typ, node string, data map[string]any, cp string, ref *checkpointRef) {
	rec := &logRecord{typ: typ, cp: cp, ref: ref, raw: eventData(data)}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.tokens, node)
	l.queue = append(l.queue, rec)
}

// token adds text to node's open token batch, opening one when there is
// none or it is full.
func (l *eventLog) token(node string, step int, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.tokens[node]
	if b == nil || b.text.Len()+len(text) > MaxTokenBatch {
		b = &logRecord{typ: belay.EventGraphTokens, data: map[string]any{"node": node, "step": step}}
		l.tokens[node] = b
		l.queue = append(l.queue, b)
	}
	b.text.WriteString(text)
	b.n++
}

// flush appends what is queued. A failure is kept for stop to report, and
// what failed is dropped: the log is not retried out of order.
func (l *eventLog) flush(ctx context.Context) {
	l.flushing.Lock()
	defer l.flushing.Unlock()
	l.mu.Lock()
	queue := l.queue
	l.queue = nil
	clear(l.tokens) // closed: later tokens start a new batch
	failed := l.err != nil
	l.mu.Unlock()
	if len(queue) == 0 || failed {
		return
	}
	recs := make([]belay.EventRecord, 0, len(queue))
	for _, r := range queue {
		if r.ref != nil {
			select {
			case <-r.ref.done:
				r.cp = r.ref.id
			case <-ctx.Done():
			}
		}
		if r.typ == belay.EventGraphTokens {
			r.data["text"], r.data["count"] = r.text.String(), r.n
			r.raw = eventData(r.data)
		}
		recs = append(recs, belay.EventRecord{Type: r.typ, CheckpointID: r.cp, Data: r.raw})
	}
	for len(recs) > 0 {
		n := min(len(recs), belay.MaxAppendEvents)
		if _, err := l.svc.AppendEvents(ctx, belay.AppendEventsInput{SessionID: l.id, Events: recs[:n]}); err != nil {
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			return
		}
		recs = recs[n:]
	}
}

// stop ends the background appends, appends what is left and reports the
// first append that failed.
func (l *eventLog) stop() error {
	close(l.stopc)
	<-l.done
	l.flush(l.ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// eventData encodes an event's data; what would not fit in the log is
// replaced by its size (data that cannot be encoded, by the reason).
func eventData(d map[string]any) json.RawMessage {
	b, err := json.Marshal(d)
	if err == nil && len(b) <= belay.MaxEventData {
		return b
	}
	small := map[string]any{}
	for _, k := range []string{"node", "step", "name", "next", "status"} {
		if v, ok := d[k]; ok {
			small[k] = v
		}
	}
	if err != nil {
		small["error"] = belay.Clip(err.Error(), 200)
	} else {
		small["truncated"], small["bytes"] = true, len(b)
	}
	b, _ = json.Marshal(small)
	return b
}

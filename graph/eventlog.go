package graph

import (
	"context"
	"encoding/json"
	"slices"
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

// eventLog writes a run's events to the event log of its session: with the
// run's own writes where it can — a checkpoint carries the events queued
// before it (belay.CreateCheckpointInput.Events), and the call that ends the
// session or releases its lease carries the rest — and in the background
// every TokenFlushInterval (belay.EventService.AppendEvents) while a node
// runs long. Records keep the order the run produced them in.
type eventLog struct {
	svc belay.Service
	id  string
	// ctx is the run's, without its cancellation: the caller's identity.
	ctx context.Context

	mu     sync.Mutex
	queue  []*logRecord
	tokens map[string]*logRecord // the open token batch of each node
	err    error                 // the first append that failed

	writing sync.Mutex // one write at a time, in order
	stopc   chan struct{}
	done    chan struct{}
}

// logRecord is one event to append. A token batch grows in text until it
// is closed; a node_end waits for its checkpoint (ref) when the save is
// deferred.
type logRecord struct {
	typ  string
	node string
	cp   string
	ref  *checkpointRef
	// owner is the save the record is written with, or not at all.
	owner *checkpointRef
	raw   json.RawMessage
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

// resolved reports whether the checkpoint's id is known.
func (c *checkpointRef) resolved() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
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
	rec := &logRecord{typ: typ, node: node, cp: cp, ref: ref, raw: eventData(data)}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.tokens, node)
	l.queue = append(l.queue, rec)
}

// own queues an event of type typ to be written with the save of checkpoint
// ref only.
func (l *eventLog) own(typ string, data json.RawMessage, ref *checkpointRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(l.queue, &logRecord{typ: typ, owner: ref, raw: data})
}

// token adds text to node's open token batch, opening one when there is
// none or it is full.
func (l *eventLog) token(node string, step int, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.tokens[node]
	if b == nil || b.text.Len()+len(text) > MaxTokenBatch {
		b = &logRecord{typ: belay.EventGraphTokens, node: node, data: map[string]any{"node": node, "step": step}}
		l.tokens[node] = b
		l.queue = append(l.queue, b)
	}
	b.text.WriteString(text)
	b.n++
}

// take removes from the queue the records that can be written now, at most
// max: those before the first whose checkpoint is still being saved, unless
// that is this, the checkpoint the records are written with. The token
// batches taken are closed. It reports false when an earlier write failed:
// the log is not written out of order.
func (l *eventLog) take(this *checkpointRef, max int) ([]*logRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, false
	}
	n := 0
	for n < len(l.queue) && n < max {
		if !l.queue[n].ready(this) {
			break
		}
		n++
	}
	// What belongs to a save that failed is not written.
	recs := slices.DeleteFunc(slices.Clone(l.queue[:n]), func(r *logRecord) bool {
		return r.owner != nil && r.owner != this && r.owner.id == ""
	})
	l.queue = l.queue[n:]
	for _, r := range recs {
		if r.typ == belay.EventGraphTokens && l.tokens[r.node] == r {
			delete(l.tokens, r.node)
		}
	}
	return recs, true
}

// ready reports whether the record can be written with the save of
// checkpoint this (nil: with no save): the checkpoint it names and the save
// it belongs to are this one or done.
func (r *logRecord) ready(this *checkpointRef) bool {
	for _, ref := range []*checkpointRef{r.ref, r.owner} {
		if ref != nil && ref != this && !ref.resolved() {
			return false
		}
	}
	return true
}

// records encodes recs; those whose checkpoint is this name the
// checkpoint they are written with.
func records(recs []*logRecord, this *checkpointRef) []belay.EventRecord {
	out := make([]belay.EventRecord, len(recs))
	for i, r := range recs {
		if r.typ == belay.EventGraphTokens {
			r.data["text"], r.data["count"] = r.text.String(), r.n
			r.raw = eventData(r.data)
		}
		out[i] = belay.EventRecord{Type: r.typ, CheckpointID: r.cp, Data: r.raw}
		switch {
		case r.ref != nil && r.ref == this:
			out[i].ThisCheckpoint = true
		case r.ref != nil:
			out[i].CheckpointID = r.ref.id
		}
	}
	return out
}

// fail keeps the first failed write for stop to report.
func (l *eventLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

// flush appends what can be appended now. A failure is kept for stop to
// report, and what failed is dropped.
func (l *eventLog) flush(ctx context.Context) {
	l.writing.Lock()
	defer l.writing.Unlock()
	l.append(ctx)
}

// append appends the queue's records that can be, in calls of at most
// belay.MaxAppendEvents; the caller holds l.writing.
func (l *eventLog) append(ctx context.Context) {
	for {
		recs, ok := l.take(nil, belay.MaxAppendEvents)
		if !ok || len(recs) == 0 {
			return
		}
		if _, err := l.svc.AppendEvents(ctx, belay.AppendEventsInput{SessionID: l.id, Events: records(recs, nil)}); err != nil {
			l.fail(err)
			return
		}
	}
}

// carry has write, a checkpoint save, carry the queued events in its
// transaction (events, which those of checkpoint this name). When write
// fails, they stay queued — but for those that name this or belong to it.
// A nil log carries nothing.
func (l *eventLog) carry(this *checkpointRef, write func(events []belay.EventRecord) error) error {
	if l == nil {
		return write(nil)
	}
	l.writing.Lock()
	defer l.writing.Unlock()
	recs, _ := l.take(this, belay.MaxAppendEvents)
	err := write(records(recs, this))
	if err != nil {
		recs = slices.DeleteFunc(recs, func(r *logRecord) bool { return this != nil && (r.ref == this || r.owner == this) })
		l.mu.Lock()
		l.queue = append(recs, l.queue...)
		l.mu.Unlock()
	}
	return err
}

// stop ends the background appends and returns the records left, for the
// call that stops the run to carry: all when there are fewer than
// belay.MaxAppendEvents (the rest appended first), with the first append
// that failed. Every checkpoint the records name is saved, or never will be.
func (l *eventLog) stop() ([]belay.EventRecord, error) {
	close(l.stopc)
	<-l.done
	l.writing.Lock()
	defer l.writing.Unlock()
	l.mu.Lock()
	waits := make([]*checkpointRef, 0, len(l.queue))
	for _, r := range l.queue {
		if r.ref != nil {
			waits = append(waits, r.ref)
		}
	}
	l.mu.Unlock()
	for _, ref := range waits {
		select {
		case <-ref.done:
		case <-l.ctx.Done():
		}
	}
	for {
		l.mu.Lock()
		n := len(l.queue)
		l.mu.Unlock()
		if n < belay.MaxAppendEvents {
			break
		}
		recs, ok := l.take(nil, n-belay.MaxAppendEvents+1)
		if !ok || len(recs) == 0 {
			break
		}
		if _, err := l.svc.AppendEvents(l.ctx, belay.AppendEventsInput{SessionID: l.id, Events: records(recs, nil)}); err != nil {
			l.fail(err)
		}
	}
	recs, ok := l.take(nil, belay.MaxAppendEvents)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		return nil, l.err
	}
	return records(recs, nil), l.err
}

// failed is the first write of the log that failed.
func (l *eventLog) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// appendNow appends recs, which a call that failed was to carry: the log
// goes on without them when that fails too.
func (l *eventLog) appendNow(recs []belay.EventRecord) {
	for len(recs) > 0 {
		n := min(len(recs), belay.MaxAppendEvents)
		if _, err := l.svc.AppendEvents(l.ctx, belay.AppendEventsInput{SessionID: l.id, Events: recs[:n]}); err != nil {
			l.fail(err)
			return
		}
		recs = recs[n:]
	}
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

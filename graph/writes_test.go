package graph_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// writes counts the writing calls a run makes to the service it wraps.
type writes struct {
	belay.Service
	mu sync.Mutex
	n  map[string]int
}

func (w *writes) count(call string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[call]++
}

// take returns the counts so far and starts again. Appends of the event log
// are left out: a run slower than TokenFlushInterval appends in the
// background too.
func (w *writes) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.n
	w.n = map[string]int{}
	delete(n, "AppendEvents")
	return n
}

func (w *writes) CreateSession(ctx context.Context, in belay.CreateSessionInput) (*belay.Session, error) {
	w.count("CreateSession")
	return w.Service.CreateSession(ctx, in)
}

func (w *writes) CreateCheckpoint(ctx context.Context, in belay.CreateCheckpointInput) (*belay.Checkpoint, error) {
	w.count("CreateCheckpoint")
	return w.Service.CreateCheckpoint(ctx, in)
}

func (w *writes) Heartbeat(ctx context.Context, in belay.LeaseInput) (*belay.Session, error) {
	w.count("Heartbeat")
	return w.Service.Heartbeat(ctx, in)
}

func (w *writes) ResumeSession(ctx context.Context, in belay.ResumeInput) (*belay.ResumeResult, error) {
	w.count("ResumeSession")
	return w.Service.ResumeSession(ctx, in)
}

func (w *writes) Decide(ctx context.Context, in belay.DecideInput) (*belay.DecideResult, error) {
	w.count("Decide")
	return w.Service.Decide(ctx, in)
}

func (w *writes) EndSession(ctx context.Context, in belay.EndSessionInput) (*belay.Session, error) {
	w.count("EndSession")
	return w.Service.EndSession(ctx, in)
}

func (w *writes) AppendEvents(ctx context.Context, in belay.AppendEventsInput) ([]belay.Event, error) {
	w.count("AppendEvents")
	return w.Service.AppendEvents(ctx, in)
}

// A run writes each thing with the write it belongs to: the lease and the
// input with the session, a step's events with its checkpoint, the answer with the step it
// lets run, the release and the end with the last checkpoint — and the log
// and the session come out as they did when each was a call of its own.
func TestRunWritesEachThingOnce(t *testing.T) {
	svc := newService(t)
	w := &writes{Service: svc, n: map[string]int{}}
	flow := reviewFlow(t)
	res, err := flow.Run(ctx, w, graph.RunInput[doc]{})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got, want := w.take(), map[string]int{"CreateSession": 1, "CreateCheckpoint": 2}; !maps.Equal(got, want) {
		t.Errorf("the run to its interrupt wrote %v, want %v", got, want)
	}
	requestID := res.Interrupt.ID
	sess, err := svc.GetSession(ctx, res.RunID)
	if err != nil || sess.Status != belay.SessionAwaitingInput || sess.Holder != "" {
		t.Fatalf("at the interrupt the session is %+v, %v; want awaiting input, held by no one", sess, err)
	}
	if res, err = flow.Resume(ctx, w, res.RunID, graph.Command{Resume: "yes"}); err != nil || res.Status != graph.Completed {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	if got, want := w.take(), map[string]int{"Heartbeat": 1, "CreateCheckpoint": 2}; !maps.Equal(got, want) {
		t.Errorf("the resume wrote %v, want %v", got, want)
	}
	sess, err = svc.GetSession(ctx, res.RunID)
	if err != nil || sess.Status != belay.SessionCompleted || sess.Holder != "" {
		t.Fatalf("at the end the session is %+v, %v", sess, err)
	}
	if req, err := svc.GetCheckpoint(ctx, requestID); err != nil || req.Decision == nil || req.Decision.SelectedOption != "approve" {
		t.Errorf("the interrupt's request after the resume: %+v, %v", req, err)
	}
	if got := describeEvents(t, graphEvents(t, svc, res.RunID, 2)); !slices.Equal(got, wantReviewEvents) {
		t.Errorf("the log has %v, want %v", got, wantReviewEvents)
	}
}

package graph_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/graph"
)

// lossy is a state whose JSON loses something: an unexported field, and
// the Go type of a number in an any.
type lossy struct {
	Extra  any      `json:"extra"`
	Seen   []string `json:"seen"`
	hidden string
}

func (s lossy) describe() string {
	return fmt.Sprintf("%T %v %q", s.Extra, s.Extra, s.hidden)
}

// Every node gets the state as a resumed run gets it — decoded from the
// JSON of the checkpoint before it — so a run that stopped mid-node (its
// process died, its context was cancelled) goes on as one that did not.
func TestNodesGetTheStateAsCheckpointed(t *testing.T) {
	svc := newService(t)
	var stop func()
	c, err := graph.New[lossy]().AddNode("set", func(_ context.Context, s lossy) (lossy, error) {
		s.Seen = append(s.Seen, s.describe())
		s.Extra, s.hidden = 2, "set"
		return s, nil
	}).AddNode("look", func(nctx context.Context, s lossy) (lossy, error) {
		if stop != nil {
			stop()
			stop = nil
			<-nctx.Done()
			return s, nctx.Err()
		}
		s.Seen = append(s.Seen, s.describe())
		return s, nil
	}).AddEdge(graph.START, "set").AddEdge("set", "look").AddEdge("look", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	in := graph.RunInput[lossy]{ProjectPath: t.TempDir(), State: lossy{Extra: 1, hidden: "input"}}

	straight, err := c.Run(ctx, svc, in)
	if err != nil || straight.Status != graph.Completed {
		t.Fatalf("Run = %+v, %v", straight, err)
	}
	want := []string{`float64 1 ""`, `float64 2 ""`}
	if !slices.Equal(straight.State.Seen, want) {
		t.Fatalf("the nodes of a run that did not stop saw %q, want %q, as from the checkpoints", straight.State.Seen, want)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop = cancel
	in.ProjectPath = t.TempDir()
	if res, err := c.Run(runCtx, svc, in); err == nil {
		t.Fatalf("the cancelled Run = %+v, want its context's error", res)
	}
	list, err := svc.ListSessions(ctx, belay.ListSessionsInput{ProjectPath: in.ProjectPath})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("sessions = %+v, %v; want the cancelled run's", list, err)
	}
	resumed, err := c.Resume(ctx, svc, list.Items[0].ID, graph.Command{})
	if err != nil || resumed.Status != graph.Completed || !slices.Equal(resumed.State.Seen, straight.State.Seen) {
		t.Fatalf("the resumed run = %+v, %v; want its nodes to see %q, as the run that did not stop", resumed, err, straight.State.Seen)
	}
}

// opaque is a state whose JSON does not decode back: an interface with
// methods cannot be decoded into.
type opaque struct {
	Wait fmt.Stringer `json:"wait"`
}

// A state whose JSON does not decode back into the state could not be
// resumed from its checkpoint: it fails the run where it is made, a
// VALIDATION_ERROR naming the state's type, not later a resume.
func TestStateThatDoesNotDecodeBackFailsTheRun(t *testing.T) {
	svc := newService(t)
	c, err := graph.New[opaque]().AddNode("wait", func(_ context.Context, s opaque) (opaque, error) {
		s.Wait = time.Second
		return s, nil
	}).AddEdge(graph.START, "wait").AddEdge("wait", graph.END).Compile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(ctx, svc, graph.RunInput[opaque]{ProjectPath: t.TempDir()})
	if !belay.IsCode(err, belay.CodeValidation) || !strings.Contains(err.Error(), "graph_test.opaque") || res == nil || res.Status != graph.Failed {
		t.Fatalf("Run = %+v, %v; want failed, a VALIDATION_ERROR naming the state's type", res, err)
	}
	if _, err := c.Run(ctx, svc, graph.RunInput[opaque]{ProjectPath: t.TempDir(), State: opaque{Wait: time.Minute}}); !belay.IsCode(err, belay.CodeValidation) {
		t.Fatalf("Run from such an input = %v, want VALIDATION_ERROR", err)
	}
}

// A branch that drops the ErrInterrupted of its unanswered interrupt still
// pauses, and what it returned is not kept as a completed branch's write:
// resumed, it runs again with the value.
func TestBranchThatDropsItsInterruptIsNotKept(t *testing.T) {
	svc := newService(t)
	dropping := func(ctx context.Context, s doc) (doc, error) {
		a, _ := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "c?"})
		s.Answers = append(s.Answers, "c:"+a)
		return s, nil
	}
	g, ran, _ := fanOut(visit("b"), dropping)
	c := compile(t, g, graph.WithReducer("steps", graph.Append[string]))
	res, err := c.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
	if err != nil || res.Status != graph.Interrupted || res.Interrupt.Node != "c" {
		t.Fatalf("Run = %+v, %v; want paused in c", res, err)
	}
	res, err = c.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes"})
	if err != nil || res.Status != graph.Completed || !slices.Equal(res.State.Answers, []string{"c:yes"}) || ran["c"] != 2 {
		t.Fatalf("Resume = %+v, %v, c ran %d times; want completed with c's answer, c run again", res, err, ran["c"])
	}
}

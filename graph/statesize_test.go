package graph_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/sqlite"
)

// corpus is a large state: 1000 documents of 1000 bytes, about 1 MB.
type corpus struct {
	Step int      `json:"step"`
	Docs []string `json:"docs"`
}

func text(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz     "[r.IntN(31)]
	}
	return string(b)
}

// TestLargeStateGrowsWithTheChange is issue 12's case: 100 steps over a
// 1 MB state that changes 1 KB per step grow the SQLite file by about the
// change (at most 2 MB in all), not by 100 copies (100 MB).
func TestLargeStateGrowsWithTheChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	empty := testutil.FileSize(t, path)

	db, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const steps = 100
	flow, err := graph.New[corpus]().
		AddNode("edit", func(_ context.Context, c corpus) (corpus, error) {
			c.Step++
			c.Docs[(c.Step*37)%len(c.Docs)] = text(rand.New(rand.NewPCG(uint64(c.Step), 2)), 1000)
			return c, nil
		}).
		AddEdge(graph.START, "edit").
		AddConditionalEdges("edit", func(c corpus) string {
			if c.Step < steps {
				return "edit"
			}
			return graph.END
		}, "edit", graph.END).
		Compile(graph.WithRecursionLimit(steps))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	state := corpus{Docs: make([]string, 1000)}
	for i := range state.Docs {
		state.Docs[i] = text(r, 1000)
	}
	res, err := flow.Run(ctx, svc, graph.RunInput[corpus]{ProjectPath: t.TempDir(), Title: "large state", State: state})
	if err != nil || res.Status != graph.Completed || res.Steps != steps {
		t.Fatalf("run = %+v, %v", res.Status, err)
	}
	svc.Close()
	if err := db.Close(); err != nil { // folds the write-ahead log into the file
		t.Fatal(err)
	}
	growth := testutil.FileSize(t, path) - empty
	t.Logf("%d steps over a state of about 1 MB: the database grew by %d bytes (%.2f MB); one copy per step would be about 100 MB", steps, growth, float64(growth)/1e6)
	if growth > 2e6 {
		t.Fatalf("the database grew by %d bytes, more than 2 MB", growth)
	}
}

// A node whose state outgrows belay.MaxStateBytes fails the run, as a state
// JSON cannot hold does: a Failed result naming the size and the limit, an
// error checkpoint with the state before the node, a failed session. It is
// not left interrupted to fail the same way on every Resume.
func TestStateOverTheLimitFailsTheRun(t *testing.T) {
	huge := strings.Repeat("x", belay.MaxStateBytes/2+1)
	grow := func(field string) graph.Node[doc] {
		return func(_ context.Context, s doc) (doc, error) {
			if field == "notes" {
				s.Notes = huge
			} else {
				s.Extra = huge
			}
			return s, nil
		}
	}
	for _, tc := range []struct {
		name string
		flow *graph.Compiled[doc]
		node string
	}{
		// One node writes both halves.
		{"one node", compile(t, graph.New[doc]().AddNode("grow", func(ctx context.Context, s doc) (doc, error) {
			s, _ = grow("notes")(ctx, s)
			return grow("extra")(ctx, s)
		}).AddEdge(graph.START, "grow").AddEdge("grow", graph.END)), "grow"},
		// Parallel branches write a half each: the merged state is too large.
		{"merged branches", compile(t, graph.New[doc]().AddNode("b", grow("notes")).AddNode("c", grow("extra")).
			AddEdge(graph.START, "b").AddEdge(graph.START, "c").AddEdge("b", graph.END).AddEdge("c", graph.END)), "b+c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			res, err := tc.flow.Run(ctx, svc, graph.RunInput[doc]{ProjectPath: t.TempDir()})
			limit := strconv.Itoa(belay.MaxStateBytes)
			if res == nil || res.Status != graph.Failed || !belay.IsCode(err, belay.CodeValidation) ||
				!strings.Contains(err.Error(), limit) || !strings.Contains(err.Error(), tc.node) {
				t.Fatalf("Run = %+v, %v; want failed in %s, naming the limit %s", res, err, tc.node, limit)
			}
			if st := sessionStatus(t, svc, res.RunID); st != belay.SessionFailed {
				t.Fatalf("session status = %s, want failed", st)
			}
			cps := checkpoints(t, svc, res.RunID)
			last := cps[len(cps)-1]
			if last.Type != belay.TypeError || last.Name != tc.node || !strings.Contains(last.Summary, limit) {
				t.Fatalf("last checkpoint = %s %s %q, want an error checkpoint of %s naming the limit", last.Type, last.Name, last.Summary, tc.node)
			}
			if _, err := tc.flow.Resume(ctx, svc, res.RunID, graph.Command{}); !belay.IsCode(err, belay.CodeConflict) {
				t.Fatalf("Resume of the failed run = %v, want CONFLICT", err)
			}
		})
	}
}

// wide is a state of four fields, one per parallel branch.
type wide struct {
	A string `json:"a,omitempty"`
	B string `json:"b,omitempty"`
	C string `json:"c,omitempty"`
	D string `json:"d,omitempty"`
}

// Parallel branches each under belay.MaxStateBytes whose completed writes
// together outgrow what one checkpoint holds fail the run when a sibling
// pauses or fails, as a state over the limit does: a Failed result, an
// error checkpoint, a failed session that Resume reports. The run is not
// left interrupted to stop at the same save on every Resume.
func TestKeptWritesOverTheLimitFailTheRun(t *testing.T) {
	third := strings.Repeat("x", 3<<20)
	write := func(set func(*wide)) graph.Node[wide] {
		return func(_ context.Context, s wide) (wide, error) {
			set(&s)
			return s, nil
		}
	}
	// ask pauses n times, then does what next does.
	ask := func(n int, next graph.Node[wide]) graph.Node[wide] {
		return func(ctx context.Context, s wide) (wide, error) {
			for range n {
				if _, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "go on?"}); err != nil {
					return s, err
				}
			}
			return next(ctx, s)
		}
	}
	// tooLarge says whether err refuses to keep the writes of a, b and c.
	tooLarge := func(err error) bool {
		var be *belay.Error
		if !errors.As(err, &be) || be.Code != belay.CodeValidation || be.Details["field"] != "writes" {
			return false
		}
		size, _ := be.Details["bytes"].(int)
		limit, _ := be.Details["limit"].(int)
		return size > limit && limit > 0 && limit < belay.MaxStateBytes &&
			strings.Contains(err.Error(), `["a" "b" "c"]`) && strings.Contains(err.Error(), strconv.Itoa(size))
	}
	boom := errors.New("d broke")
	for _, tc := range []struct {
		name string
		c, d graph.Node[wide]
		// resume says the run pauses first, keeping what fits, and fails
		// on its Resume.
		resume bool
		want   func(error) bool
	}{
		// The pause would keep the three writes for the resume: the run
		// fails naming them, their size and the limit.
		{"a sibling pauses", write(func(s *wide) { s.C = third }), ask(1, write(func(*wide) {})), false, tooLarge},
		// The run fails on the sibling's error, recorded without the
		// writes that do not fit.
		{"a sibling fails", write(func(s *wide) { s.C = third }), func(context.Context, wide) (wide, error) { return wide{}, boom }, false,
			func(err error) bool { return errors.Is(err, boom) }},
		// The first pause keeps a's and b's writes; once resumed, c
		// completes and d pauses again.
		{"a resumed sibling pauses again", ask(1, write(func(s *wide) { s.C = third })), ask(2, write(func(*wide) {})), true, tooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t)
			flow, err := graph.New[wide]().
				AddNode("a", write(func(s *wide) { s.A = third })).
				AddNode("b", write(func(s *wide) { s.B = third })).
				AddNode("c", tc.c).AddNode("d", tc.d).
				AddEdge(graph.START, "a").AddEdge(graph.START, "b").AddEdge(graph.START, "c").AddEdge(graph.START, "d").
				AddEdge("a", graph.END).AddEdge("b", graph.END).AddEdge("c", graph.END).AddEdge("d", graph.END).
				Compile()
			if err != nil {
				t.Fatal(err)
			}
			res, err := flow.Run(ctx, svc, graph.RunInput[wide]{ProjectPath: t.TempDir()})
			if tc.resume {
				if err != nil || res.Status != graph.Interrupted || len(res.Interrupts) != 2 {
					t.Fatalf("Run = %+v, %v; want paused in c and d", res, err)
				}
				cmd := graph.Command{Resumes: map[string]any{res.Interrupts[0].ID: "yes", res.Interrupts[1].ID: "yes"}}
				res, err = flow.Resume(ctx, svc, res.RunID, cmd)
			}
			if res == nil || res.Status != graph.Failed || !tc.want(err) {
				t.Fatalf("Run = %+v, %v; want failed", res, err)
			}
			if st := sessionStatus(t, svc, res.RunID); st != belay.SessionFailed {
				t.Fatalf("session status = %s, want failed", st)
			}
			cps := checkpoints(t, svc, res.RunID)
			if last := cps[len(cps)-1]; last.Type != belay.TypeError || last.Summary != belay.Clip(err.Error(), belay.MaxSummary) {
				t.Fatalf("last checkpoint = %s %q, want an error checkpoint of the run's error", last.Type, last.Summary)
			}
			if _, err := flow.Resume(ctx, svc, res.RunID, graph.Command{}); !belay.IsCode(err, belay.CodeConflict) || !strings.Contains(err.Error(), "failed") {
				t.Fatalf("Resume of the failed run = %v, want CONFLICT: it has ended (failed)", err)
			}
		})
	}
}

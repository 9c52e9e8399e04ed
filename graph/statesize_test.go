package graph_test

import (
	"context"
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

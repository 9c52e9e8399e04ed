package graph_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/httpapi"
)

// graphEvents reads the graph events of a run from its session's log, up
// to its results-th graph.result.
func graphEvents(tb testing.TB, svc belay.Service, runID string, results int) []belay.Event {
	tb.Helper()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []belay.Event
	done := fmt.Errorf("done")
	err := svc.Follow(fctx, belay.EventFilter{SessionID: runID, Types: belay.GraphEventTypes}, 0, func(_ int64, batch []belay.Event) error {
		for _, e := range batch {
			out = append(out, e)
			if e.Type == belay.EventGraphResult {
				results--
			}
		}
		if results == 0 {
			return done
		}
		return nil
	})
	if err != done {
		tb.Fatalf("following run %s: %v after %d events", runID, err, len(out))
	}
	return out
}

// eventData decodes an event's data.
func eventData(tb testing.TB, e belay.Event) map[string]any {
	tb.Helper()
	var d map[string]any
	if err := json.Unmarshal(e.Data, &d); err != nil {
		tb.Fatalf("event %d %s: data %s: %v", e.Seq, e.Type, e.Data, err)
	}
	return d
}

// describeEvents writes the events one per line: type, node and the
// custom event's name, as the tests compare them.
func describeEvents(tb testing.TB, evs []belay.Event) []string {
	var out []string
	for _, e := range evs {
		d := eventData(tb, e)
		s := strings.TrimPrefix(e.Type, "graph.")
		switch e.Type {
		case belay.EventGraphResult:
			s += " " + fmt.Sprint(d["status"])
		case belay.EventGraphCustom:
			s += fmt.Sprintf(" %v %v", d["node"], d["name"])
		default:
			s += fmt.Sprintf(" %v", d["node"])
		}
		out = append(out, s)
	}
	return out
}

// reviewFlow is plan → review (an interrupt) → finalize; plan emits a
// custom event and three tokens.
func reviewFlow(tb testing.TB, opts ...graph.Option) *graph.Compiled[doc] {
	return compile(tb, graph.New[doc]().
		AddNode("plan", func(ctx context.Context, s doc) (doc, error) {
			graph.Emit(ctx, "plan", map[string]any{"queries": []string{"a", "b"}})
			for _, tok := range []string{"out", "line", "."} {
				graph.EmitToken(ctx, tok)
			}
			s.Steps = append(s.Steps, "plan")
			return s, nil
		}).
		AddNode("review", func(ctx context.Context, s doc) (doc, error) {
			answer, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "ok?"})
			if err != nil {
				return s, err
			}
			s.Answers = append(s.Answers, answer)
			return s, nil
		}).
		AddNode("finalize", visit("finalize")).
		AddEdge(graph.START, "plan").AddEdge("plan", "review").AddEdge("review", "finalize").AddEdge("finalize", graph.END),
		opts...)
}

var wantReviewEvents = []string{
	"node_start plan", "custom plan plan", "tokens plan", "node_end plan",
	"node_start review", "interrupt review", "result interrupted",
	"node_start review", "node_end review", "node_start finalize", "node_end finalize", "result completed",
}

func TestEventLogRecordsTheRun(t *testing.T) {
	svc := newService(t)
	flow := reviewFlow(t)
	res, err := flow.Run(ctx, svc, graph.RunInput[doc]{})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	interruptID := res.Interrupt.ID
	if res, err = flow.Resume(ctx, svc, res.RunID, graph.Command{Resume: "yes"}); err != nil || res.Status != graph.Completed {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	evs := graphEvents(t, svc, res.RunID, 2)
	if got := describeEvents(t, evs); !slices.Equal(got, wantReviewEvents) {
		t.Fatalf("the log has\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantReviewEvents, "\n"))
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("events out of order: %d after %d", evs[i].Seq, evs[i-1].Seq)
		}
	}
	if d := eventData(t, evs[2]); d["text"] != "outline." || d["count"] != 3.0 {
		t.Errorf("tokens = %v, want the three tokens as one text", d)
	}
	if d := eventData(t, evs[1]); fmt.Sprint(d["data"]) != "map[queries:[a b]]" {
		t.Errorf("custom event data = %v", d)
	}
	if evs[5].CheckpointID != interruptID {
		t.Errorf("the interrupt event names checkpoint %q", evs[5].CheckpointID)
	}
	hist, err := flow.History(ctx, svc, res.RunID, graph.HistoryOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]string{}
	for _, snap := range hist.Items {
		steps[snap.CheckpointID] = snap.Node
	}
	for _, e := range evs {
		if e.Type == belay.EventGraphNodeEnd && steps[e.CheckpointID] != eventData(t, e)["node"] {
			t.Errorf("node_end of %v names checkpoint %q, of node %q", eventData(t, e)["node"], e.CheckpointID, steps[e.CheckpointID])
		}
	}
}

func TestTokensAreCoalescedInTheLog(t *testing.T) {
	svc := newService(t)
	const tokens = 10000
	flow := compile(t, graph.New[doc]().
		AddNode("write", func(ctx context.Context, s doc) (doc, error) {
			for i := range tokens {
				if !graph.EmitToken(ctx, strconv.Itoa(i)+" ") {
					return s, context.Canceled
				}
			}
			return s, nil
		}).
		AddEdge(graph.START, "write").AddEdge("write", graph.END))
	var want strings.Builder
	for i := range tokens {
		want.WriteString(strconv.Itoa(i) + " ")
	}
	// Streamed, every token reaches the consumer; the log gets batches.
	streamed := 0
	var runID string
	for ev, err := range flow.Stream(ctx, svc, graph.RunInput[doc]{}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == graph.EventCustom && ev.Name == graph.TokenEvent {
			streamed++
		}
		runID = ev.RunID
	}
	if streamed != tokens {
		t.Fatalf("the stream carried %d tokens, want %d", streamed, tokens)
	}
	var text strings.Builder
	batches, count := 0, 0
	for _, e := range graphEvents(t, svc, runID, 1) {
		if e.Type != belay.EventGraphTokens {
			continue
		}
		d := eventData(t, e)
		text.WriteString(d["text"].(string))
		count += int(d["count"].(float64))
		batches++
		if len(e.Data) > belay.MaxEventData {
			t.Errorf("a batch of %d bytes", len(e.Data))
		}
	}
	// 48,890 bytes of text: at least 3 batches of 16 KiB, and one more per
	// 50 ms the node took.
	if batches < 3 || batches > 40 {
		t.Errorf("%d tokens made %d events, want a few", tokens, batches)
	}
	if text.String() != want.String() || count != tokens {
		t.Errorf("the batches hold %d tokens, %d bytes; want all %d, %d bytes, in order", count, text.Len(), tokens, want.Len())
	}
	t.Logf("%d tokens, %d log events", tokens, batches)
}

// TestNodeEndCheckpointByDurability pins what each durability mode gives
// as the checkpoint of a node_end: the stream knows it only when the step
// was saved before the next (sync); the log names it once saved — every
// step in sync and async, only the last before the stop in exit, the only
// one exit saves.
func TestNodeEndCheckpointByDurability(t *testing.T) {
	for _, c := range []struct {
		mode     graph.Durability
		streamed string // per node_end of a, b, c: "x" when set
		logged   string
	}{
		{graph.DurabilitySync, "xxx", "xxx"},
		{graph.DurabilityAsync, "---", "xxx"},
		{graph.DurabilityExit, "---", "--x"},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			svc := newService(t)
			flow := compile(t, graph.New[doc]().AddNode("a", visit("a")).AddNode("b", visit("b")).AddNode("c", visit("c")).
				AddEdge(graph.START, "a").AddEdge("a", "b").AddEdge("b", "c").AddEdge("c", graph.END), graph.WithDurability(c.mode))
			var streamed []byte
			var runID string
			for ev, err := range flow.Stream(ctx, svc, graph.RunInput[doc]{}) {
				if err != nil {
					t.Fatal(err)
				}
				runID = ev.RunID
				if ev.Type == graph.EventNodeEnd {
					streamed = append(streamed, mark(ev.CheckpointID))
				}
			}
			var logged []byte
			for _, e := range graphEvents(t, svc, runID, 1) {
				if e.Type == belay.EventGraphNodeEnd {
					logged = append(logged, mark(e.CheckpointID))
					if e.CheckpointID != "" {
						cp, err := svc.GetCheckpoint(ctx, e.CheckpointID)
						if err != nil || cp.Name != eventData(t, e)["node"] {
							t.Errorf("node_end of %v names %v, %v", eventData(t, e)["node"], cp, err)
						}
					}
				}
			}
			if string(streamed) != c.streamed || string(logged) != c.logged {
				t.Errorf("checkpoints on node_end: streamed %s, logged %s; want %s, %s", streamed, logged, c.streamed, c.logged)
			}
		})
	}
}

func mark(id string) byte {
	if id == "" {
		return '-'
	}
	return 'x'
}

// TestEventLogOverHTTP runs the graph remotely, through the Go client
// against a real server on loopback, while a Server-Sent Events client
// follows the run's session: it sees the run's node events live, in order,
// and a reconnect with Last-Event-ID continues where it stopped.
func TestEventLogOverHTTP(t *testing.T) {
	svc := newService(t)
	tok, err := svc.CreateToken(ctx, belay.CreateTokenInput{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Service: svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Version: "test", Authenticate: svc.Authenticate}).Handler())
	t.Cleanup(srv.Close)
	remote, err := client.New(srv.URL, tok.Secret)
	if err != nil {
		t.Fatal(err)
	}
	alice := context.Background()
	flow := reviewFlow(t)

	sseCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop) // before the server closes: it waits for its streams

	// The SSE client follows every graph event from now on.
	var from int64
	errStop := fmt.Errorf("stop")
	if err := svc.Follow(ctx, belay.EventFilter{After: belay.FromNow}, 0, func(after int64, _ []belay.Event) error {
		from = after
		return errStop
	}); err != errStop {
		t.Fatal(err)
	}
	frames := make(chan sseFrame, 100)
	go readSSE(sseCtx, t, srv.URL+"/v1/events?after="+strconv.FormatInt(from, 10)+"&type=graph.node_start&type=graph.node_end&type=graph.interrupt&type=graph.result",
		tok.Secret, "", frames)

	res, err := flow.Run(alice, remote, graph.RunInput[doc]{})
	if err != nil || res.Status != graph.Interrupted {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got := checkpointNames(t, svc, res.RunID); !slices.Equal(got, []string{"__start__", "plan", "review"}) {
		t.Fatalf("over /v1 the run saved %v", got)
	}
	var seen []string
	var ids []string
	read := func(n int) {
		for range n {
			select {
			case f := <-frames:
				var e belay.Event
				if err := json.Unmarshal([]byte(f.data), &e); err != nil {
					t.Fatalf("frame %+v: %v", f, err)
				}
				if e.SessionID != res.RunID || f.event != e.Type {
					t.Fatalf("frame %+v", f)
				}
				seen, ids = append(seen, describeEvents(t, []belay.Event{e})[0]), append(ids, f.id)
			case <-time.After(10 * time.Second):
				t.Fatalf("the SSE client saw only %v", seen)
			}
		}
	}
	read(5) // the run so far, while it waits for a person
	want := []string{"node_start plan", "node_end plan", "node_start review", "interrupt review", "result interrupted"}
	if !slices.Equal(seen, want) {
		t.Fatalf("the SSE client saw %v, want %v", seen, want)
	}
	if res, err = flow.Resume(alice, remote, res.RunID, graph.Command{Resume: "yes"}); err != nil || res.Status != graph.Completed {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	read(5)
	want = append(want, "node_start review", "node_end review", "node_start finalize", "node_end finalize", "result completed")
	if !slices.Equal(seen, want) {
		t.Fatalf("the SSE client saw %v, want %v", seen, want)
	}

	// A client that saw up to the interrupt reconnects and gets the rest.
	again := make(chan sseFrame, 100)
	go readSSE(sseCtx, t, srv.URL+"/v1/events?session="+res.RunID+"&type=graph.node_start&type=graph.node_end&type=graph.result", tok.Secret, ids[3], again)
	for i, w := range want[4:] {
		select {
		case f := <-again:
			var e belay.Event
			if err := json.Unmarshal([]byte(f.data), &e); err != nil {
				t.Fatal(err)
			}
			if got := describeEvents(t, []belay.Event{e})[0]; got != w {
				t.Fatalf("after Last-Event-ID %s, event %d is %s, want %s", ids[3], i, got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the reconnected client saw nothing")
		}
	}

	// Appending is only for those who may write: a read-only token is refused.
	ro, err := svc.CreateToken(ctx, belay.CreateTokenInput{User: "alice", Scopes: []belay.Scope{belay.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	roClient, err := client.New(srv.URL, ro.Secret)
	if err != nil {
		t.Fatal(err)
	}
	_, err = roClient.AppendEvents(alice, belay.AppendEventsInput{SessionID: res.RunID, Events: []belay.EventRecord{{Type: belay.EventGraphCustom}}})
	if !belay.IsCode(err, belay.CodeUnauthorized) {
		t.Errorf("a read-only token appended: %v", err)
	}
	_, err = remote.AppendEvents(alice, belay.AppendEventsInput{SessionID: res.RunID, Events: []belay.EventRecord{{Type: belay.EventCheckpointCreated}}})
	if !belay.IsCode(err, belay.CodeValidation) {
		t.Errorf("appending a type of belay's own: %v", err)
	}

	// A run's session is created held, over /v1 too, and its lease is
	// given up with the run's last events.
	held, err := remote.CreateSession(alice, belay.CreateSessionInput{Holder: "h1", Lease: time.Minute})
	if err != nil || held.Holder != "h1" || held.LeaseExpiresAt == nil {
		t.Fatalf("CreateSession with a holder = %+v, %v", held, err)
	}
	if _, err := remote.Heartbeat(alice, belay.LeaseInput{SessionID: held.ID, Holder: "h2"}); !belay.IsCode(err, belay.CodeLeaseLost) {
		t.Errorf("another holder took a session created held: %v", err)
	}
	result := belay.EventRecord{Type: belay.EventGraphResult, Data: json.RawMessage(`{"status":"interrupted"}`)}
	released, err := remote.Heartbeat(alice, belay.LeaseInput{SessionID: held.ID, Holder: "h1", Release: true, Events: []belay.EventRecord{result}})
	if err != nil || released.Status != belay.SessionInterrupted {
		t.Fatalf("release = %+v, %v", released, err)
	}
	ended, err := remote.EndSession(alice, belay.EndSessionInput{SessionID: held.ID, Status: belay.SessionAbandoned, Events: []belay.EventRecord{result}})
	if err != nil || ended.Status != belay.SessionAbandoned {
		t.Fatalf("EndSession = %+v, %v", ended, err)
	}
	if evs := graphEvents(t, svc, held.ID, 2); len(evs) != 2 {
		t.Fatalf("the release and the end appended %+v", evs)
	}
}

type sseFrame struct{ id, event, data string }

// readSSE reads the Server-Sent Events of url into frames until the
// connection ends.
func readSSE(ctx context.Context, t *testing.T, url, token, lastID string, frames chan<- sseFrame) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.Error(err)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var f sseFrame
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if f.data != "" {
				frames <- f
			}
			f = sseFrame{}
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data += line[6:]
		}
	}
}

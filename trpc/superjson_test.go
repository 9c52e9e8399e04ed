package trpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/belayhq/belay"
)

// superJSONAnswer is a superjson value: plain JSON and the paths of its dates.
type superJSONAnswer struct {
	JSON json.RawMessage `json:"json"`
	Meta struct {
		Values map[string][]string `json:"values"`
	} `json:"meta"`
}

// TestSuperJSONMarksOnlyBelaysDates: over /trpc-superjson only the time
// fields of belay's own types are Dates. The documents belay keeps for its
// users — agent state, metadata, HITL context and modifications, session
// state, event data — are never looked into, so they come back byte for
// byte as over /trpc, however their keys are named: a key ending in "At"
// stays a string (its zone and nanoseconds kept), and a "__proto__" key,
// which superjson refuses in a meta path, breaks no read of its session.
func TestSuperJSONMarksOnlyBelaysDates(t *testing.T) {
	e := newEnv(t)
	const when = `"2026-01-01T10:00:00.123456789+02:00"`
	hitl := e.create(t, "hitl", `,"agentState":{"lastRunAt":`+when+`},"metadata":{"reviewedAt":`+when+`},`+
		`"hitl":{"required":true,"title":"t","context":{"dueAt":`+when+`},"options":[{"id":"edit","label":"Edit","action":"modify"}],`+
		`"timeout":{"duration":3600,"defaultAction":"pause"}}`)
	decide := fmt.Sprintf(`{"checkpointId":%q,"action":"modify","selectedOption":"edit","modifications":{"startAt":%s}}`, hitl, when)
	if status, body := e.do(t, "/trpc/checkpoints.decide", decide); status != http.StatusOK {
		t.Fatalf("decide: %d %s", status, body)
	}
	proto := e.create(t, "manual", `,"agentState":{"__proto__":{"createdAt":"2026-01-01T00:00:00Z"}}`)
	checkpointDates := `^(items\.\d+\.)?(createdAt|expiresAt|hitlConfig\.timeout\.expiresAt|hitlDecision\.decidedAt)$`
	for _, c := range []struct {
		name  string
		path  string
		input any
		// dates matches every date path; want lists those there must be.
		dates string
		want  []string
	}{
		{"decided HITL checkpoint", "checkpoints.get", hitl, checkpointDates, []string{"createdAt", "hitlConfig.timeout.expiresAt", "hitlDecision.decidedAt"}},
		{"__proto__ in agent state", "checkpoints.get", proto, checkpointDates, []string{"createdAt"}},
		{"list of both", "checkpoints.list", map[string]any{"taskId": e.sid}, checkpointDates, []string{"items.0.createdAt", "items.1.createdAt"}},
		{"session state", "sessions.get", e.sid, `^(createdAt|updatedAt)$`, []string{"createdAt", "updatedAt"}},
		{"sessions", "sessions.list", map[string]any{}, `^items\.0\.(createdAt|updatedAt)$`, []string{"items.0.createdAt", "items.0.updatedAt"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			plain := e.query(t, "/trpc", c.path, c.input)
			var sj struct {
				Result struct {
					Data superJSONAnswer `json:"data"`
				} `json:"result"`
			}
			if err := json.Unmarshal(e.query(t, "/trpc-superjson", c.path, map[string]any{"json": c.input}), &sj); err != nil {
				t.Fatal(err)
			}
			var p struct {
				Result struct {
					Data json.RawMessage `json:"data"`
				} `json:"result"`
			}
			if err := json.Unmarshal(plain, &p); err != nil {
				t.Fatal(err)
			}
			if string(sj.Result.Data.JSON) != string(p.Result.Data) {
				t.Fatalf("superjson's value differs from plain JSON's:\n%s\n%s", sj.Result.Data.JSON, p.Result.Data)
			}
			checkDates(t, sj.Result.Data.Meta.Values, c.dates, c.want)
		})
	}
	t.Run("stream.events", func(t *testing.T) {
		plain := e.events(t, "/trpc", map[string]any{"sessionId": e.sid, "after": 0})
		sj := e.events(t, "/trpc-superjson", map[string]any{"json": map[string]any{"sessionId": e.sid, "after": 0}})
		if len(plain) < 5 { // session.created, 2 × checkpoint.created, hitl.required, hitl.decided
			t.Fatalf("%d events: %v", len(plain), plain)
		}
		if len(sj) != len(plain) {
			t.Fatalf("%d events over superjson, %d over plain JSON", len(sj), len(plain))
		}
		for i, frame := range sj {
			var v superJSONAnswer
			if err := json.Unmarshal([]byte(frame), &v); err != nil {
				t.Fatal(err)
			}
			if string(v.JSON) != plain[i] {
				t.Fatalf("event %d differs from plain JSON's:\n%s\n%s", i, v.JSON, plain[i])
			}
			checkDates(t, v.Meta.Values, `^createdAt$`, []string{"createdAt"})
		}
	})
}

// checkDates checks that every path of dates matches pattern, and that
// each of want is a date.
func checkDates(t *testing.T, dates map[string][]string, pattern string, want []string) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	for path, types := range dates {
		if !re.MatchString(path) || len(types) != 1 || types[0] != "Date" {
			t.Errorf("meta marks %s as %v", path, types)
		}
	}
	for _, path := range want {
		if dates[path] == nil {
			t.Errorf("meta does not mark %s: %v", path, dates)
		}
	}
}

// query is a GET of one call to path with input, which must succeed.
func (e *env) query(t *testing.T, root, path string, input any) []byte {
	t.Helper()
	in, _ := json.Marshal(input)
	status, body := e.do(t, root+"/"+path+"?input="+url.QueryEscape(string(in)), "")
	if status != http.StatusOK {
		t.Fatalf("%s/%s: %d %s", root, path, status, clip(body))
	}
	return body
}

// events reads stream.events over Server-Sent Events with input until the
// stream has sent every event so far, and returns their data.
func (e *env) events(t *testing.T, root string, input any) []string {
	t.Helper()
	last := fmt.Sprint("id: ", e.lastSeq(t))
	in, _ := json.Marshal(input)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+root+"/stream.events?input="+url.QueryEscape(string(in)), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer any")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "":
			events = append(events, strings.TrimPrefix(line, "data: "))
		case line == last:
			return events
		case line == "":
			event = ""
		}
	}
	t.Fatalf("the stream ended after %d events: %v", len(events), sc.Err())
	return nil
}

// lastSeq is the sequence number of the newest event.
func (e *env) lastSeq(t *testing.T) int64 {
	t.Helper()
	var last int64
	stop := errors.New("stop")
	err := e.svc.Follow(belay.WithActor(context.Background(), admin), belay.EventFilter{After: belay.FromNow}, 0,
		func(after int64, _ []belay.Event) error {
			last = after
			return stop
		})
	if !errors.Is(err, stop) {
		t.Fatalf("follow: %v", err)
	}
	return last
}

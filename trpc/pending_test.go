package trpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/trpc"
)

// TestPendingSaysWhetherTheTaskIsReadable: checkpoints.getHITLPending and
// stream.hitlRequired say, for each request, whether the caller may read
// its task, as core's PendingHITL does: an approver named on a request may
// decide it without reading the session it is in.
func TestPendingSaysWhetherTheTaskIsReadable(t *testing.T) {
	e := newEnv(t)
	adminCtx := belay.WithActor(context.Background(), admin)
	tokens := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		tk, err := e.svc.CreateToken(adminCtx, belay.CreateTokenInput{User: name})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = tk.Secret
	}
	alice := belay.WithActor(context.Background(), belay.Actor{UserID: "alice"})
	sess, err := e.svc.CreateSession(alice, belay.CreateSessionInput{Title: "alice's run"})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := e.svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "may I?",
		HITL: &belay.HITLInput{Required: true, Title: "Deploy?", Approvers: []string{"bob"},
			Options: []belay.HITLOption{{ID: "ok", Label: "Approve", Action: belay.ActionApprove}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(trpc.New("/trpc/", trpc.Options{Service: e.svc, Authenticate: e.svc.Authenticate,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	get := func(user, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/trpc/"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokens[user])
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s as %s: %d %s", path, user, resp.StatusCode, b)
		}
		return resp
	}
	for user, readable := range map[string]bool{"alice": true, "bob": false} {
		var out struct {
			Result struct {
				Data []map[string]json.RawMessage `json:"data"`
			} `json:"result"`
		}
		if err := json.NewDecoder(get(user, "checkpoints.getHITLPending").Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if len(out.Result.Data) != 1 {
			t.Fatalf("%s's pending: %+v", user, out.Result.Data)
		}
		var task struct {
			ID       string `json:"id"`
			Readable *bool  `json:"readable"`
		}
		if err := json.Unmarshal(out.Result.Data[0]["task"], &task); err != nil {
			t.Fatal(err)
		}
		if task.ID != sess.ID || task.Readable == nil || *task.Readable != readable {
			t.Errorf("%s's pending task = %s, want readable %v", user, out.Result.Data[0]["task"], readable)
		}

		lines := bufio.NewScanner(get(user, "stream.hitlRequired").Body)
		var ev struct {
			CheckpointID string `json:"checkpointId"`
			Readable     *bool  `json:"readable"`
		}
		for ev.CheckpointID == "" && lines.Scan() {
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok && data != "{}" {
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					t.Fatalf("%s: %v", data, err)
				}
			}
		}
		if ev.CheckpointID != cp.ID || ev.Readable == nil || *ev.Readable != readable {
			t.Errorf("%s's stream.hitlRequired sent %+v, want %s readable %v", user, ev, cp.ID, readable)
		}
	}
}

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
	"time"

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

// TestPendingCountsDownToTheNextDeadline: a request whose checkpoint expires
// before its pause timeout counts down to the expiry, which rejects it, in
// checkpoints.getHITLPending and stream.hitlRequired alike.
func TestPendingCountsDownToTheNextDeadline(t *testing.T) {
	e := newEnv(t)
	ctx := belay.WithActor(context.Background(), admin)
	exp := time.Now().Add(time.Hour)
	cp, err := e.svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: e.sid, Summary: "may I?", ExpiresAt: &exp,
		HITL: &belay.HITLInput{Required: true, Title: "Deploy?", Timeout: &belay.TimeoutInput{Duration: 7200, DefaultAction: belay.ActionPause}}})
	if err != nil {
		t.Fatal(err)
	}
	type item struct {
		Deadline      *belay.HITLDeadline `json:"deadline"`
		TimeRemaining *int64              `json:"timeRemaining"`
	}
	check := func(what string, got item) {
		t.Helper()
		if d := got.Deadline; d == nil || !d.At.Equal(*cp.ExpiresAt) || d.Reason != belay.DeadlineExpired || d.Action != belay.ActionReject || d.Option != "reject" {
			t.Errorf("%s: deadline %+v, want the expiry's rejection at %s", what, got.Deadline, cp.ExpiresAt)
		}
		if got.TimeRemaining == nil || *got.TimeRemaining > 3600 || *got.TimeRemaining < 3500 {
			t.Errorf("%s: timeRemaining %v, want the hour to the expiry", what, got.TimeRemaining)
		}
	}
	status, body := e.do(t, "/trpc/checkpoints.getHITLPending", "")
	var out struct {
		Result struct {
			Data []item `json:"data"`
		} `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &out) != nil || len(out.Result.Data) != 1 {
		t.Fatalf("checkpoints.getHITLPending: %d %s", status, clip(body))
	}
	check("checkpoints.getHITLPending", out.Result.Data[0])

	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/trpc/stream.hitlRequired", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer any")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok && data != "{}" {
			var ev item
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			check("stream.hitlRequired", ev)
			return
		}
	}
	t.Fatalf("stream.hitlRequired sent nothing: %v", lines.Err())
}

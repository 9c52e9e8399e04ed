package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// wsServer is a real HTTP server with workspace snapshots. Tokens are user
// names; "root" is an admin.
type wsServer struct {
	url  string
	data string // the data directory, when the test needs it
}

func newWSServer(t *testing.T, withGit bool) *wsServer {
	t.Helper()
	data := t.TempDir()
	snapshots := ""
	if withGit {
		snapshots = data
	}
	// Users who are not admins work on projects under the system's temp dir.
	return serveWorkspaces(t, data, snapshots, []string{os.TempDir()})
}

// serveWorkspaces starts a real HTTP server over a fresh database in dir,
// with snapshots in dataDir (none when ""), whose users who are not admins
// may use workspaces under roots only. Tokens are user names; "root" is an
// admin.
func serveWorkspaces(t *testing.T, dir, dataDir string, roots []string) *wsServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	opts := core.Options{Store: db, WorkspaceRoots: roots, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if dataDir != "" {
		if opts.Workspaces, err = workspace.New(workspace.Options{DataDir: dataDir}); err != nil {
			t.Fatal(err)
		}
	}
	api := httpapi.New(httpapi.Options{Service: core.New(opts), Logger: opts.Logger,
		Authenticate: func(_ context.Context, token string) (belay.Actor, error) {
			return belay.Actor{UserID: token, Admin: token == "root"}, nil
		}})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &wsServer{url: srv.URL, data: dataDir}
}

func (s *wsServer) as(t *testing.T, user string) *client.Client {
	t.Helper()
	c, err := client.New(s.url, user)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (s *wsServer) raw(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func wsFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			b, _ := os.ReadFile(filepath.Join(root, e.Name()))
			out[e.Name()] = string(b)
		}
	}
	return out
}

// TestWorkspaceAPIEndToEnd is the "done when" over HTTP with the Go
// client: save with a snapshot, break files, diff, roll back, undo, export,
// import into another server and roll back there.
func TestWorkspaceAPIEndToEnd(t *testing.T) {
	t.Run("plain directory", func(t *testing.T) { apiEndToEnd(t, false) })
	t.Run("git repository", func(t *testing.T) { apiEndToEnd(t, true) })
}

func apiEndToEnd(t *testing.T, withGit bool) {
	ctx := context.Background()
	srv := newWSServer(t, true)
	alice := srv.as(t, "alice")
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "alpha", "b.txt": "bravo", ".gitignore": "*.log\n"})
	gitDigest := func() string { return "" }
	if withGit {
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-q", "-m", "initial"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = project
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		gitDigest = func() string { return testtree.Digest(t, filepath.Join(project, ".git")) }
	}
	gitBefore := gitDigest()
	first, err := alice.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "first", Name: "init", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if first.WorkspaceRef == "" || len(first.Files.Created) != 3 {
		t.Fatalf("first = %+v", first)
	}
	atFirst := wsFiles(t, project)
	testtree.Write(t, project, map[string]string{"a.txt": "broken", "new.txt": "new", "x.log": "ignored"})
	os.Remove(filepath.Join(project, "b.txt"))
	broken := wsFiles(t, project)

	d, err := alice.DiffCheckpoint(ctx, belay.DiffInput{CheckpointID: first.ID})
	if err != nil || len(d.Files) != 3 || !strings.Contains(d.Patch, "+broken") {
		t.Fatalf("diff = %+v, %v", d, err)
	}
	dry, err := alice.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: first.ID, DryRun: true})
	if err != nil || !dry.DryRun || !slices.Equal(dry.RemovedFiles, []string{"new.txt"}) || !maps.Equal(wsFiles(t, project), broken) {
		t.Fatalf("dry run = %+v, %v", dry, err)
	}
	res, err := alice.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: first.ID, Reason: "over HTTP"})
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(atFirst)
	want["x.log"] = "ignored"
	if got := wsFiles(t, project); !maps.Equal(got, want) {
		t.Errorf("after rollback %v, want %v", got, want)
	}
	if res.Session.HeadCheckpointID != first.ID || !slices.Equal(res.RestoredFiles, []string{"a.txt", "b.txt"}) || res.Rollback == nil {
		t.Errorf("restore = %+v", res)
	}
	// Unsaved work, so the undo saves a pre-rollback checkpoint too.
	testtree.Write(t, project, map[string]string{"late.txt": "late"})
	if _, err := alice.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: res.SafetyCheckpoint.ID}); err != nil {
		t.Fatal(err)
	}
	if got := wsFiles(t, project); !maps.Equal(got, broken) {
		t.Errorf("after undo %v, want %v", got, broken)
	}
	rbs, err := alice.ListRollbacks(ctx, first.SessionID)
	if err != nil || len(rbs) != 2 || rbs[0].Reason != "over HTTP" {
		t.Errorf("rollbacks = %+v, %v", rbs, err)
	}
	if rep, err := alice.Validate(ctx, belay.ValidateInput{SessionID: first.SessionID}); err != nil || !rep.OK || rep.Checkpoints != 3 {
		t.Errorf("validate = %+v, %v", rep, err)
	}
	if rep, err := alice.Validate(ctx, belay.ValidateInput{SessionID: first.SessionID, Repair: true}); err != nil || !rep.OK {
		t.Errorf("validate --repair = %+v, %v", rep, err)
	}
	if du, err := alice.DiskUsage(ctx); err != nil || len(du.Workspaces) != 1 || du.Workspaces[0].Bytes == 0 {
		t.Errorf("usage = %+v, %v", du, err)
	}

	var archive bytes.Buffer
	if err := alice.ExportSession(ctx, first.SessionID, &archive); err != nil {
		t.Fatal(err)
	}
	other := newWSServer(t, true)
	_, err = other.as(t, "alice").ImportSession(ctx, belay.ImportInput{}, bytes.NewReader(archive.Bytes()))
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	root := other.as(t, "root")
	imp, err := root.ImportSession(ctx, belay.ImportInput{ProjectPath: project}, bytes.NewReader(archive.Bytes()))
	if err != nil || imp.Checkpoints != 3 || imp.Rollbacks != 2 || imp.Snapshots != 3 {
		t.Fatalf("import = %+v, %v", imp, err)
	}
	if _, err := root.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: first.ID}); err != nil {
		t.Fatal(err)
	}
	if got := wsFiles(t, project); !maps.Equal(got, want) {
		t.Errorf("rollback on the other server: %v, want %v", got, want)
	}
	_, err = root.ImportSession(ctx, belay.ImportInput{ProjectPath: project}, bytes.NewReader(archive.Bytes()))
	testutil.WantCode(t, err, belay.CodeConflict)
	if gitDigest() != gitBefore {
		t.Error("the user's .git changed")
	}

	_, err = srv.as(t, "bob").DeleteSession(ctx, first.SessionID)
	testutil.WantCode(t, err, belay.CodeSessionNotFound)
	del, err := alice.DeleteSession(ctx, first.SessionID)
	if err != nil || !del.SnapshotsPruned || del.Checkpoints != 3 {
		t.Fatalf("delete = %+v, %v", del, err)
	}
	_, err = alice.GetSession(ctx, first.SessionID)
	testutil.WantCode(t, err, belay.CodeSessionNotFound)
	if del.FreedBytes == 0 {
		t.Errorf("delete freed nothing: %+v", del)
	}

	_, err = alice.CollectGarbage(ctx, belay.GCInput{})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	if gc, err := srv.as(t, "root").CollectGarbage(ctx, belay.GCInput{DryRun: true}); err != nil || !gc.DryRun {
		t.Errorf("gc --dry-run over HTTP = %+v, %v", gc, err)
	}
}

func TestWorkspaceAPIErrors(t *testing.T) {
	ctx := context.Background()
	srv := newWSServer(t, true)
	alice := srv.as(t, "alice")
	project := t.TempDir()
	testtree.Write(t, project, map[string]string{"a.txt": "a"})

	status, body := srv.raw(t, "POST", "/v1/checkpoints",
		`{"projectPath":"`+project+`","summary":"raw","snapshot":true,"paths":["a.txt"]}`)
	var cp belay.Checkpoint
	if status != http.StatusCreated || json.Unmarshal(body, &cp) != nil || cp.WorkspaceRef == "" {
		t.Fatalf("POST /v1/checkpoints with snapshot: %d %s", status, body)
	}
	plain, err := alice.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: cp.SessionID, Summary: "no snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	missing := "01a1fdb8-0000-7000-8000-000000000000"
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     belay.Code
	}{
		{"restore without body", "POST", "/v1/checkpoints/" + plain.ID + "/restore", "", 200, ""},
		{"restore dry run", "POST", "/v1/checkpoints/" + cp.ID + "/restore", `{"dryRun":true}`, 200, ""},
		{"restore unknown field", "POST", "/v1/checkpoints/" + cp.ID + "/restore", `{"force":true}`, 400, belay.CodeValidation},
		{"restore other id in body", "POST", "/v1/checkpoints/" + cp.ID + "/restore", `{"checkpointId":"` + missing + `"}`, 400, belay.CodeValidation},
		{"restore missing", "POST", "/v1/checkpoints/" + missing + "/restore", `{}`, 404, belay.CodeCheckpointNotFound},
		{"diff bad to", "GET", "/v1/checkpoints/" + cp.ID + "/diff?to=yesterday", "", 400, belay.CodeValidation},
		{"diff without snapshot", "GET", "/v1/checkpoints/" + plain.ID + "/diff", "", 400, belay.CodeValidation},
		{"diff unknown parameter", "GET", "/v1/checkpoints/" + cp.ID + "/diff?from=x", "", 400, belay.CodeValidation},
		{"export missing session", "GET", "/v1/sessions/" + missing + "/export", "", 404, belay.CodeSessionNotFound},
		{"import by a non-admin", "POST", "/v1/sessions/import", "not an archive", 403, belay.CodeUnauthorized},
		{"snapshot of a missing directory", "POST", "/v1/checkpoints", `{"projectPath":"` + filepath.Join(os.TempDir(), "belay-missing-"+missing) + `","summary":"x","snapshot":true}`, 400, belay.CodeValidation},
		{"snapshot of a missing directory outside the roots", "POST", "/v1/checkpoints", `{"projectPath":"/nonexistent","summary":"x","snapshot":true}`, 403, belay.CodeUnauthorized},
		{"validate bad session", "GET", "/v1/validate?session=x", "", 400, belay.CodeValidation},
		{"validate repair everything", "POST", "/v1/validate", `{"repair":true}`, 403, belay.CodeUnauthorized},
		{"rollbacks of missing session", "GET", "/v1/sessions/" + missing + "/rollbacks", "", 404, belay.CodeSessionNotFound},
		{"export branch of a plain directory", "POST", "/v1/sessions/" + cp.SessionID + "/export-branch", "", 400, belay.CodeValidation},
		{"delete missing session", "DELETE", "/v1/sessions/" + missing, "", 404, belay.CodeSessionNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := srv.raw(t, c.method, c.path, c.body)
			var e struct {
				Error *belay.Error `json:"error"`
			}
			json.Unmarshal(body, &e)
			if status != c.status || (c.code != "" && (e.Error == nil || e.Error.Code != c.code)) {
				t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, status, body, c.status, c.code)
			}
		})
	}
	_, err = srv.as(t, "root").ImportSession(ctx, belay.ImportInput{}, strings.NewReader("not an archive"))
	testutil.WantCode(t, err, belay.CodeValidation)

	// A server without git refuses snapshots: an internal error, said plainly.
	noGit := newWSServer(t, false).as(t, "alice")
	_, err = noGit.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "x", Snapshot: true})
	testutil.WantCode(t, err, belay.CodeInternal)
	if !strings.Contains(err.Error(), "needs git") {
		t.Errorf("error without git = %v; want it to say belay needs git", err)
	}
}

// TestBusyImportAnswers429 holds every import slot with uploads that do not
// arrive: one more import is told to come back later, not queued.
func TestBusyImportAnswers429(t *testing.T) {
	srv := newWSServer(t, true)
	post := func(body io.Reader) *http.Response {
		req, err := http.NewRequest(http.MethodPost, srv.url+"/v1/sessions/import", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer root")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	var held []*io.PipeWriter
	done := make(chan int)
	running := 0 // uploads whose status is not read yet
	hold := func() {
		pr, pw := io.Pipe()
		held = append(held, pw)
		running++
		go func() { done <- post(pr).StatusCode }()
		pw.Write([]byte{0x1f})
	}
	for range core.MaxImports {
		hold()
	}
	// The held uploads take their slots as the server gets to them. One
	// that arrives while a probe holds a slot is turned away: another is
	// held in its place, so that MaxImports are always on their way.
	var resp *http.Response
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for drained := false; !drained; {
			select {
			case status := <-done:
				running--
				if status != http.StatusTooManyRequests {
					t.Fatalf("a held import ended with %d before it was let go", status)
				}
				hold()
			default:
				drained = true
			}
		}
		resp = post(strings.NewReader("x"))
		if resp.StatusCode == http.StatusTooManyRequests || time.Now().After(deadline) {
			break
		}
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("import while %d run: %d, Retry-After %q; want 429 with Retry-After", core.MaxImports, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, pw := range held {
		pw.Close()
	}
	// The MaxImports uploads holding the slots end with 400 once let go;
	// one turned away after the last drain above ended with 429 already.
	ended := map[int]int{}
	for range running {
		ended[<-done]++
	}
	if ended[http.StatusBadRequest] != core.MaxImports || ended[http.StatusBadRequest]+ended[http.StatusTooManyRequests] != running {
		t.Errorf("the held imports ended with %v, want %d times 400 and any others 429", ended, core.MaxImports)
	}
	if resp := post(strings.NewReader("x")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("import after the others ended: %d, want 400", resp.StatusCode)
	}
}

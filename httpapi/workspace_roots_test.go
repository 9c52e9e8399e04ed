package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// TestWorkspaceRootSymlinkEscapeOverHTTP: a token holder who is not an admin
// cannot snapshot or roll back a directory outside the server's workspace
// root by naming a symlink under the root that points out of it.
func TestWorkspaceRootSymlinkEscapeOverHTTP(t *testing.T) {
	ctx := context.Background()
	data, roots := t.TempDir(), t.TempDir()
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	db, err := sqlite.Open(ctx, filepath.Join(data, "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws, err := workspace.New(workspace.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	api := httpapi.New(httpapi.Options{Service: core.New(core.Options{Store: db, Workspaces: ws, WorkspaceRoots: []string{roots}, Logger: log}),
		Logger: log,
		Authenticate: func(_ context.Context, token string) (belay.Actor, error) {
			return belay.Actor{UserID: token, Admin: token == "root"}, nil
		}})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	s := &wsServer{url: srv.URL}

	testtree.Write(t, outside, map[string]string{"victim.txt": "precious"})
	link := filepath.Join(roots, "project")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	alice := s.as(t, "alice")
	_, err = alice.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: link, Summary: "steal", Snapshot: true})
	testutil.WantCode(t, err, belay.CodeUnauthorized)

	plain, err := alice.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: link, Summary: "no snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.as(t, "root").CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: plain.SessionID, Summary: "by an admin", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, outside, map[string]string{"victim.txt": "edited", "new.txt": "new"})
	before := testtree.Read(t, outside)
	_, err = alice.DiffCheckpoint(ctx, belay.DiffInput{CheckpointID: snap.ID})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	_, err = alice.RestoreCheckpoint(ctx, belay.RestoreInput{CheckpointID: snap.ID})
	testutil.WantCode(t, err, belay.CodeUnauthorized)
	if got := testtree.Read(t, outside); !maps.Equal(got, before) {
		t.Errorf("files outside the root changed:\n got %v\nwant %v", got, before)
	}
}

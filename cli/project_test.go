package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/store/sqlite"
)

// TestSubdirectoryIsPartOfTheProject: like git, belay finds the project from
// a subdirectory: the nearest directory above with a .git, or one belay
// already has a session for. --project overrides.
func TestSubdirectoryIsPartOfTheProject(t *testing.T) {
	t.Run("git repository", func(t *testing.T) {
		root := t.TempDir()
		testtree.Write(t, root, map[string]string{"go.mod": "module x\n", "pkg/a.go": "package pkg\n"})
		testtree.Git(t, root, "init", "-q", "-b", "main")
		top := newWSCLI(t, root)
		pkg := &wsCLI{project: filepath.Join(root, "pkg"), data: top.data, home: top.home}

		cp := wsJSON[belay.Checkpoint](t, pkg, "save", "-m", "from pkg")
		if cp.ProjectPath != root || cp.Files == nil || len(cp.Files.Created) != 2 {
			t.Fatalf("save in pkg = %+v, want project %s with both files", cp, root)
		}
		second := wsJSON[belay.Checkpoint](t, top, "save", "-m", "from the top")
		if second.SessionID != cp.SessionID || second.Seq != 2 {
			t.Errorf("save at the top went to session %s #%d, want %s #2", second.SessionID, second.Seq, cp.SessionID)
		}
		if got := wsJSON[belay.Checkpoint](t, pkg, "show", "2"); got.ID != second.ID {
			t.Errorf("show 2 in pkg = %s, want %s", got.ID, second.ID)
		}
		list := wsJSON[belay.CheckpointList](t, pkg, "checkpoints")
		if list.TotalCount != 2 {
			t.Errorf("checkpoints in pkg: %d, want 2", list.TotalCount)
		}

		// --project makes the subdirectory a project of its own.
		own := wsJSON[belay.Checkpoint](t, pkg, "--project", ".", "save", "-m", "pkg alone")
		if own.ProjectPath != filepath.Join(root, "pkg") || own.SessionID == cp.SessionID || own.Seq != 1 {
			t.Errorf("save --project . = %+v", own)
		}
	})
	t.Run("known project without git", func(t *testing.T) {
		root := t.TempDir()
		testtree.Write(t, root, map[string]string{"a.txt": "a\n", "deep/er/b.txt": "b\n"})
		top := newWSCLI(t, root)
		first := wsJSON[belay.Checkpoint](t, top, "save", "-m", "at the top")
		deep := &wsCLI{project: filepath.Join(root, "deep", "er"), data: top.data, home: top.home}
		if err := os.WriteFile(filepath.Join(root, "deep", "er", "c.txt"), []byte("c\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cp := wsJSON[belay.Checkpoint](t, deep, "save", "-m", "deep down")
		if cp.SessionID != first.SessionID || cp.ProjectPath != root || cp.Files == nil || len(cp.Files.Created) != 1 {
			t.Errorf("save deep down = %+v, want session %s of %s", cp, first.SessionID, root)
		}
		// A directory with neither is its own project.
		other := &wsCLI{project: t.TempDir(), data: top.data, home: top.home}
		if got := wsJSON[belay.Checkpoint](t, other, "save", "-m", "elsewhere"); got.ProjectPath != other.project {
			t.Errorf("save elsewhere = %+v", got)
		}
	})
	t.Run("another user's session above", func(t *testing.T) {
		// A session another user who is no admin began in a directory above
		// is no sign of the project: saves by path never continue it, and
		// taking its directory would snapshot (and roll back) the siblings.
		above := t.TempDir()
		project := filepath.Join(above, "mine")
		testtree.Write(t, above, map[string]string{"mine/a.txt": "a\n", "sibling/work.txt": "theirs\n"})
		cli := newWSCLI(t, project)
		db, err := sqlite.Open(context.Background(), filepath.Join(cli.data, "belay.db"))
		if err != nil {
			t.Fatal(err)
		}
		carol := belay.WithActor(context.Background(), belay.Actor{UserID: "carol"})
		svc := core.New(core.Options{Store: db})
		admin := belay.WithActor(context.Background(), belay.Actor{UserID: "admin", Admin: true})
		if _, err := svc.CreateToken(admin, belay.CreateTokenInput{User: "carol"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CreateSession(carol, belay.CreateSessionInput{ProjectPath: above}); err != nil {
			t.Fatal(err)
		}
		svc.Close()
		db.Close()
		cp := wsJSON[belay.Checkpoint](t, cli, "save", "-m", "mine")
		if cp.ProjectPath != project || cp.Files == nil || len(cp.Files.Created) != 1 {
			t.Errorf("save = %+v, want project %s with its one file", cp, project)
		}
	})
}

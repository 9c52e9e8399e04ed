package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
)

// newRootsServer is a real HTTP server whose users who are not admins may
// use workspaces under roots only; outside is a directory outside them.
// Tokens are user names; "root" is an admin.
func newRootsServer(t *testing.T) (s *wsServer, roots, outside string) {
	t.Helper()
	data, roots := t.TempDir(), t.TempDir()
	outside, err := os.MkdirTemp("", "belay-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	return serveWorkspaces(t, data, data, []string{roots}), roots, outside
}

// TestWorkspaceRootSymlinkEscapeOverHTTP: a token holder who is not an admin
// cannot snapshot or roll back a directory outside the server's workspace
// root by naming a symlink under the root that points out of it.
func TestWorkspaceRootSymlinkEscapeOverHTTP(t *testing.T) {
	ctx := context.Background()
	s, roots, outside := newRootsServer(t)
	testtree.Write(t, outside, map[string]string{"victim.txt": "precious"})
	link := filepath.Join(roots, "project")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	alice := s.as(t, "alice")
	_, err := alice.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: link, Summary: "steal", Snapshot: true})
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

// TestExportBranchRunsNothingOfTheRepositoryOverHTTP: export-branch by a
// user who is not an admin runs none of the hooks or commands the project's
// repository configures, and refuses a .git (a gitfile or a symlink) that
// leads out of the workspace roots, writing nothing there; so does the first
// snapshot, which would otherwise borrow that repository's objects and index,
// and of a repository borrowing objects from one outside the roots.
func TestExportBranchRunsNothingOfTheRepositoryOverHTTP(t *testing.T) {
	ctx := context.Background()
	s, roots, outside := newRootsServer(t)
	bob := s.as(t, "bob")
	ran := filepath.Join(outside, "ran")
	hook := "#!/bin/sh\necho \"$0\" >>" + ran + "\n"
	project := filepath.Join(roots, "p")
	testtree.Write(t, project, map[string]string{"a.txt": "alpha", "hooks/reference-transaction": hook, "hooks/post-index-change": hook})
	testtree.Git(t, project, "init", "-q")
	testtree.Git(t, project, "add", "a.txt")
	testtree.Git(t, project, "commit", "-q", "-m", "initial")
	if err := os.WriteFile(filepath.Join(project, ".git", "hooks", "reference-transaction"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"reference-transaction", "post-index-change"} {
		if err := os.Chmod(filepath.Join(project, "hooks", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := bob.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "work", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.ExportBranch(ctx, belay.ExportBranchInput{SessionID: cp.SessionID}); err != nil {
		t.Fatal(err)
	}
	testtree.Git(t, project, "config", "core.hooksPath", "hooks")
	testtree.Git(t, project, "config", "core.fsmonitor", "sh -c 'echo fsmonitor >>"+ran+"'")
	if _, err := bob.ExportBranch(ctx, belay.ExportBranchInput{SessionID: cp.SessionID, Branch: "again"}); err != nil {
		t.Fatal(err)
	}
	if out, err := os.ReadFile(ran); err == nil {
		t.Errorf("export-branch ran the repository's commands:\n%s", out)
	}
	if got := testtree.Git(t, project, "rev-parse", "again"); got != testtree.Git(t, project, "rev-parse", "belay/"+cp.SessionID) {
		t.Errorf("branch again = %s", got)
	}

	// The repository moves out of the roots; the project keeps a gitfile
	// or a symlink to it.
	elsewhere := filepath.Join(outside, "repo.git")
	if err := os.Rename(filepath.Join(project, ".git"), elsewhere); err != nil {
		t.Fatal(err)
	}
	before := testtree.Digest(t, elsewhere)
	for name, link := range map[string]func(dir string) error{
		"gitfile": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+elsewhere+"\n"), 0o644)
		},
		"symlink": func(dir string) error { return os.Symlink(elsewhere, filepath.Join(dir, ".git")) },
	} {
		t.Run(name, func(t *testing.T) {
			if err := link(project); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(filepath.Join(project, ".git")) })
			_, err := bob.ExportBranch(ctx, belay.ExportBranchInput{SessionID: cp.SessionID, Branch: "out-" + name})
			testutil.WantCode(t, err, belay.CodeUnauthorized)
			fresh := filepath.Join(roots, "fresh-"+name)
			testtree.Write(t, fresh, map[string]string{"a.txt": "alpha"})
			if err := link(fresh); err != nil {
				t.Fatal(err)
			}
			// A snapshot reads nothing of it (its index, objects,
			// exclude file) and takes the files themselves.
			snap, err := bob.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: fresh, Summary: "first", Snapshot: true})
			if err != nil || snap.Files == nil || !slices.Equal(snap.Files.Created, []string{"a.txt"}) {
				t.Errorf("a snapshot of a workspace whose .git leads out: %+v, %v; want a.txt taken", snap, err)
			}
			if testtree.Digest(t, elsewhere) != before {
				t.Error("the repository outside the roots changed")
			}
		})
	}
	// A repository under the roots that borrows objects from one outside
	// them (objects/info/alternates) would lend them to a snapshot.
	borrower := filepath.Join(roots, "borrower")
	testtree.Write(t, borrower, map[string]string{"a.txt": "alpha"})
	testtree.Git(t, borrower, "init", "-q")
	testtree.Write(t, filepath.Join(borrower, ".git", "objects", "info"), map[string]string{"alternates": filepath.Join(elsewhere, "objects") + "\n"})
	borrowed, err := bob.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: borrower, Summary: "first", Snapshot: true})
	if err != nil || borrowed.Files == nil || !slices.Equal(borrowed.Files.Created, []string{"a.txt"}) {
		t.Errorf("a snapshot of a repository borrowing from outside: %+v, %v; want a.txt taken, nothing borrowed", borrowed, err)
	}
	// Nor one whose info/exclude, which a snapshot reads, is a link out:
	// the snapshot ignores nothing it says.
	excluder := filepath.Join(roots, "excluder")
	testtree.Write(t, excluder, map[string]string{"a.txt": "alpha"})
	testtree.Git(t, excluder, "init", "-q")
	testtree.Write(t, outside, map[string]string{"exclude": "a.txt\n"})
	exclude := filepath.Join(excluder, ".git", "info", "exclude")
	if err := os.Remove(exclude); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "exclude"), exclude); err != nil {
		t.Fatal(err)
	}
	excluded, err := bob.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: excluder, Summary: "first", Snapshot: true})
	if err != nil || excluded.Files == nil || !slices.Equal(excluded.Files.Created, []string{"a.txt"}) {
		t.Errorf("a snapshot of a repository whose exclude file leads out: %+v, %v; want a.txt taken", excluded, err)
	}

	// Nor may a directory of the repository export-branch writes to lead
	// out of them: its refs, reflogs or objects.
	for _, sub := range []string{"refs", "logs", "objects"} {
		t.Run(sub, func(t *testing.T) {
			linked := filepath.Join(roots, "linked-"+sub)
			testtree.Write(t, linked, map[string]string{"a.txt": "alpha"})
			testtree.Git(t, linked, "init", "-q")
			testtree.Git(t, linked, "add", "a.txt")
			testtree.Git(t, linked, "commit", "-q", "-m", "initial")
			cp, err := bob.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: linked, Summary: "work", Snapshot: true})
			if err != nil {
				t.Fatal(err)
			}
			moved := filepath.Join(outside, "linked-"+sub)
			if err := os.Rename(filepath.Join(linked, ".git", sub), moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, filepath.Join(linked, ".git", sub)); err != nil {
				t.Fatal(err)
			}
			before := testtree.Digest(t, moved)
			_, err = bob.ExportBranch(ctx, belay.ExportBranchInput{SessionID: cp.SessionID})
			testutil.WantCode(t, err, belay.CodeUnauthorized)
			if testtree.Digest(t, moved) != before {
				t.Errorf("%s outside the roots changed", sub)
			}
		})
	}
}

// sharedWorkspace has alice and bob each save a snapshot of one workspace
// under the roots, then empties the file of alice's snapshot ref, as a crash
// can (validate --repair rebuilds it from her checkpoint's row).
func sharedWorkspace(t *testing.T) (s *wsServer, aliceCP, bobCP *belay.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	s, roots, _ := newRootsServer(t)
	project := filepath.Join(roots, "shared")
	testtree.Write(t, project, map[string]string{"a.txt": "alice's"})
	aliceCP, err := s.as(t, "alice").CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "alice", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	testtree.Write(t, project, map[string]string{"a.txt": "bob's"})
	bobCP, err = s.as(t, "bob").CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: "bob", Snapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := filepath.Glob(filepath.Join(s.data, "workspaces", "*", "repo.git", "refs", "belay", aliceCP.SessionID, "1"))
	if err != nil || len(refs) != 1 {
		t.Fatalf("alice's ref: %v, %v", refs, err)
	}
	if err := os.Truncate(refs[0], 0); err != nil {
		t.Fatal(err)
	}
	return s, aliceCP, bobCP
}

// TestDeleteSessionKeepsAnotherUsersDamagedSnapshotOverHTTP: bob deleting his
// session in a workspace he shares with alice does not reclaim her snapshot
// while its ref is damaged; her repair rebuilds the ref afterwards.
func TestDeleteSessionKeepsAnotherUsersDamagedSnapshotOverHTTP(t *testing.T) {
	ctx := context.Background()
	s, aliceCP, bobCP := sharedWorkspace(t)
	alice := s.as(t, "alice")
	if _, err := s.as(t, "bob").DeleteSession(ctx, bobCP.SessionID); err != nil {
		t.Fatal(err)
	}
	rep, err := alice.Validate(ctx, belay.ValidateInput{SessionID: aliceCP.SessionID, Repair: true})
	if err != nil || !rep.OK {
		t.Fatalf("alice's repair = %+v, %v", rep, err)
	}
	d, err := alice.DiffCheckpoint(ctx, belay.DiffInput{CheckpointID: aliceCP.ID})
	if err != nil || !strings.Contains(d.Patch, "+bob's") {
		t.Errorf("alice's diff = %+v, %v", d, err)
	}
}

// TestValidateShowsAndRepairsOnlyTheCallersRefsOverHTTP: in a workspace
// bob shares with alice, bob's validate neither names alice's damaged ref
// (her session's id) nor removes it on repair; her repair rebuilds it.
func TestValidateShowsAndRepairsOnlyTheCallersRefsOverHTTP(t *testing.T) {
	ctx := context.Background()
	s, aliceCP, bobCP := sharedWorkspace(t)
	bob := s.as(t, "bob")
	for _, repair := range []bool{false, true} {
		rep, err := bob.Validate(ctx, belay.ValidateInput{SessionID: bobCP.SessionID, Repair: repair})
		if err != nil {
			t.Fatal(err)
		}
		if text, _ := json.Marshal(rep); !rep.OK || strings.Contains(string(text), aliceCP.SessionID) {
			t.Errorf("bob's validate (repair %v) = %s", repair, text)
		}
	}
	alice := s.as(t, "alice")
	rep, err := alice.Validate(ctx, belay.ValidateInput{SessionID: aliceCP.SessionID, Repair: true})
	if err != nil || !rep.OK || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("alice's repair = %+v, %v", rep, err)
	}
	if _, err := alice.DiffCheckpoint(ctx, belay.DiffInput{CheckpointID: aliceCP.ID}); err != nil {
		t.Errorf("alice's diff: %v", err)
	}
}

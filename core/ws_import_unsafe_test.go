package core_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
	"github.com/belayhq/belay/internal/testutil"
)

// TestImportRefusesASnapshotWritingIntoGit: an archive whose snapshot holds
// .git/hooks/pre-commit (git's plumbing writes such a tree, and the
// checkpoint's checksum is anyone's to compute) is refused before anything
// is imported, so no rollback can write a hook into the user's repository.
func TestImportRefusesASnapshotWritingIntoGit(t *testing.T) {
	src := newWSEnv(t)
	testtree.Write(t, src.project, map[string]string{"a.txt": "a"})
	one := src.save(t, "one")
	repos, err := filepath.Glob(filepath.Join(src.data, "workspaces", "*", "repo.git"))
	if err != nil || len(repos) != 1 {
		t.Fatalf("shadow repositories %v, %v", repos, err)
	}
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_DIR="+repos[0], "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=x", "GIT_AUTHOR_EMAIL=x@example.com", "GIT_COMMITTER_NAME=x", "GIT_COMMITTER_EMAIL=x@example.com")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	hook := git("#!/bin/sh\necho owned\n", "hash-object", "-w", "--stdin")
	hooks := git("100755 blob "+hook+"\tpre-commit\n", "mktree")
	dotGit := git("040000 tree "+hooks+"\thooks\n", "mktree")
	a := git("", "rev-parse", one.WorkspaceRef+":a.txt")
	tree := git("040000 tree "+dotGit+"\t.git\n100644 blob "+a+"\ta.txt\n", "mktree")
	evil := git("", "commit-tree", "-m", "one", tree)
	git("", "update-ref", "refs/belay/"+one.SessionID+"/1", evil)
	wsTamper(t, src.db, one.ID, func(cp *belay.Checkpoint) {
		cp.WorkspaceRef = evil
		cp.Checksum, _ = cp.ComputeChecksum()
	})
	archive := src.export(t, one.SessionID)

	dst := newWSEnv(t)
	testtree.Write(t, dst.project, map[string]string{"a.txt": "mine"})
	if err := os.MkdirAll(filepath.Join(dst.project, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = dst.svc.ImportSession(admin, belay.ImportInput{ProjectPath: dst.project}, bytes.NewReader(archive))
	testutil.WantCode(t, err, belay.CodeValidation, "archive")
	if list, _ := dst.svc.ListSessions(admin, belay.ListSessionsInput{}); list.TotalCount != 0 {
		t.Errorf("sessions after a refused import: %d", list.TotalCount)
	}
	if refs, err := dst.ws.Refs(localCtx, dst.project, "refs/"); err != nil || len(refs) != 0 {
		t.Errorf("refs after a refused import: %v, %v", refs, err)
	}
	if _, err := os.Lstat(filepath.Join(dst.project, ".git", "hooks", "pre-commit")); err == nil {
		t.Error("a hook was written into the project's .git")
	}
}

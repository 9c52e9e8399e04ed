package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func newManager(t *testing.T) *Manager {
	t.Helper()
	m, err := New(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// userGit runs git as a user would in dir, isolated from the machine's
// configuration.
func userGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=user", "GIT_AUTHOR_EMAIL=user@example.com",
		"GIT_COMMITTER_NAME=user", "GIT_COMMITTER_EMAIL=user@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func initUserRepo(t *testing.T, dir string) {
	t.Helper()
	userGit(t, dir, "init", "-q", "-b", "main")
	userGit(t, dir, "add", "-A")
	userGit(t, dir, "commit", "-q", "--allow-empty", "-m", "initial")
}

// writeFiles creates files; a value starting with "->" makes a symlink.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func removeFiles(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
}

// treeState describes everything under root except .git directories:
// "file 644 <content>", "file 755 <content>", "link <target>" or "dir".
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	state := make(map[string]string)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if d.Name() == ".git" && d.IsDir() {
			return filepath.SkipDir
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			state[rel] = "link " + target
		case d.IsDir():
			state[rel] = "dir"
		default:
			fi, err := d.Info()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			mode := "644"
			if fi.Mode()&0o100 != 0 {
				mode = "755"
			}
			state[rel] = "file " + mode + " " + string(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// hashTree hashes every file below dir (contents and modes), for "was
// anything written" checks.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := make(map[string]string)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := sha256.New()
		h.Write([]byte(fi.Mode().String()))
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			h.Write([]byte(target))
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		sums[rel] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func diffStates(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	keys := slices.Sorted(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if want[k] != got[k] {
			t.Errorf("%s: %q: want %q, got %q", what, k, want[k], got[k])
		}
	}
}

func snapshot(t *testing.T, m *Manager, root, ref, parent string, paths ...string) *Snapshot {
	t.Helper()
	snap, err := m.Snapshot(context.Background(), SnapshotRequest{
		Root: root, Ref: ref, Parent: parent, Message: "checkpoint " + ref + "\n", Paths: paths,
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", ref, err)
	}
	return snap
}

// shadowGit runs git in the shadow repository of root.
func shadowGit(t *testing.T, m *Manager, root string, args ...string) string {
	t.Helper()
	s, err := m.workspaceFor(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.run(context.Background(), s, runOpts{}, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// treeFiles lists "<mode> <path>" for every entry of a commit's tree.
func treeFiles(t *testing.T, m *Manager, root, commit string) []string {
	t.Helper()
	var files []string
	for _, entry := range splitNUL([]byte(shadowGit(t, m, root, "ls-tree", "-r", "-z", commit))) {
		meta, name, _ := strings.Cut(entry, "\t")
		files = append(files, strings.Fields(meta)[0]+" "+name)
	}
	return files
}

func wantCode(t *testing.T, err error, code Code) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("want *Error with code %s, got %v", code, err)
	}
}

package workspace

import (
	"bytes"
	"crypto/sha1"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestIndexRoundTrip reads indexes git wrote in each version and writes
// them back: git must read the result as the same index, with the same
// cache tree.
func TestIndexRoundTrip(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a.txt": "a\n", "a-b/c.txt": "c\n", "a/b/deep.txt": "deep\n", "a/z.txt": "z\n",
		"b.sh": "#!/bin/sh\n", "long/" + string(bytes.Repeat([]byte("n"), 120)) + ".txt": "long\n",
	})
	if err := os.Chmod(filepath.Join(root, "b.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2", "3", "4"} {
		t.Run("v"+version, func(t *testing.T) {
			index := filepath.Join(t.TempDir(), "index")
			git := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("git", append([]string{"--git-dir", filepath.Join(root, ".git"), "--work-tree", root}, args...)...)
				cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+index, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
				git("init", "-q")
			}
			git("add", "-A")
			git("update-index", "--index-version", version)
			tree := git("write-tree")
			data, err := os.ReadFile(index)
			if err != nil {
				t.Fatal(err)
			}
			ix, err := parseIndex(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(ix.entries) != 7 || ix.tree == nil || !ix.tree.valid || ix.tree.entries != 7 {
				t.Fatalf("parsed %d entries, cache tree %+v", len(ix.entries), ix.tree)
			}
			want := git("ls-files", "--debug", "-s")
			if err := os.WriteFile(index, encodeIndex(ix.entries, ix.tree), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := git("ls-files", "--debug", "-s"); got != want {
				t.Errorf("git reads the written index as\n%s\nwant\n%s", got, want)
			}
			if got := git("write-tree"); got != tree {
				t.Errorf("tree %s, want %s", got, tree)
			}
		})
	}
}

// TestIndexDamageRefused: a changed byte anywhere fails the checksum.
func TestIndexDamageRefused(t *testing.T) {
	data := encodeIndex([]indexEntry{{path: "a", mode: 0o100644}}, nil)
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 1
		if _, err := parseIndex(bad); err == nil {
			t.Fatalf("a flipped bit at %d is accepted", i)
		}
	}
	if _, err := parseIndex(data); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseIndex(f *testing.F) {
	seed := encodeIndex([]indexEntry{{path: "a/b", mode: 0o100644}, {path: "c", mode: 0o120000}}, &cacheTree{valid: true, entries: 2, subs: map[string]*cacheTree{"a": {entries: 1}}})
	f.Add(seed[:len(seed)-sha1.Size])
	f.Fuzz(func(t *testing.T, body []byte) {
		// The input is checksummed here, so that the fuzzer gets past it.
		sum := sha1.Sum(body)
		ix, err := parseIndex(append(body, sum[:]...))
		if err != nil {
			return
		}
		again, err := parseIndex(encodeIndex(ix.entries, ix.tree))
		if err != nil {
			t.Fatalf("an index read back after writing fails: %v", err)
		}
		if len(again.entries) != len(ix.entries) {
			t.Fatalf("%d entries, then %d", len(ix.entries), len(again.entries))
		}
	})
}

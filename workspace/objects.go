package workspace

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A snapshot's commit and ref are written here rather than by `git
// commit-tree` and `git update-ref`: two git processes fewer per snapshot.
// They are written as git writes them (the same bytes, so the same ids;
// loose objects and loose refs, through temporary files and renames) and
// synced as core.fsync=committed asks (the object before the ref that names
// it). Whatever this code does not cover goes to git.

// commitBody is the commit `git commit-tree tree -F -` writes with belay's
// identity at unix time when, and false when git would change the message
// (not UTF-8: git re-encodes it) or the message holds a NUL.
func commitBody(tree, msg string, when int64) ([]byte, bool) {
	if !utf8.ValidString(msg) || strings.ContainsRune(msg, 0) {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteString("tree " + tree + "\n")
	stamp := strconv.FormatInt(when, 10) + " +0000\n"
	b.WriteString("author belay <belay@localhost> " + stamp)
	b.WriteString("committer belay <belay@localhost> " + stamp)
	b.WriteString("\n")
	b.WriteString(msg)
	return b.Bytes(), true
}

// objectHeader is what begins a git object of kind and size, before its
// body, in what its id hashes and in what is stored.
func objectHeader(kind string, size int64) []byte {
	return []byte(kind + " " + strconv.FormatInt(size, 10) + "\x00")
}

// writeLooseObject stores an object of the shadow repository (SHA-1) as a
// loose object and returns its id. It is durable when this returns: the
// file is synced before it is renamed into place, and the directory after.
func writeLooseObject(repo, kind string, body []byte) (string, error) {
	header := objectHeader(kind, int64(len(body)))
	h := sha1.New()
	h.Write(header)
	h.Write(body)
	id := hex.EncodeToString(h.Sum(nil))
	objects := filepath.Join(repo, "objects")
	dir := filepath.Join(objects, id[:2])
	final := filepath.Join(dir, id[2:])
	if _, err := os.Stat(final); err == nil {
		return id, nil
	}
	newDir := false
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("write object: %w", err)
		}
		newDir = true
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", fmt.Errorf("write object: %w", err)
	}
	zw, _ := zlib.NewWriterLevel(tmp, zlib.BestSpeed) // git's core.looseCompression
	_, werr := zw.Write(header)
	if werr == nil {
		_, werr = zw.Write(body)
	}
	if werr == nil {
		werr = zw.Close()
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o444)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), final)
	}
	if werr == nil {
		werr = syncDir(dir)
	}
	if werr == nil && newDir {
		werr = syncDir(objects)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write object %s: %w", id, werr)
	}
	return id, nil
}

// snapshotRef reports whether ref is refs/belay/<session>/<seq> with two
// plain components (letters, digits, '-', '_', '.', not starting with a
// dot, no "..", not ending in ".lock"): such a ref cannot clash with any
// other ref belay writes, so it can be written as a loose ref directly.
func snapshotRef(ref string) bool {
	rest, ok := strings.CutPrefix(ref, "refs/belay/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || p[0] == '.' || strings.Contains(p, "..") || strings.HasSuffix(p, ".lock") {
			return false
		}
		for _, c := range p {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
				return false
			}
		}
	}
	return true
}

// writeLooseRef points ref at id as git's update-ref would, through
// <ref>.lock (created exclusively, so a stale lock fails as it does for
// git), synced, renamed over the ref, and the directory synced.
func writeLooseRef(repo, ref, id string) error {
	file := filepath.Join(repo, filepath.FromSlash(ref))
	dir := filepath.Dir(file)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write ref %s: %w", ref, err)
		}
		// The new directories' entries, up to refs/.
		for d := dir; d != filepath.Join(repo, "refs"); d = filepath.Dir(d) {
			if err := syncDir(filepath.Dir(d)); err != nil {
				return fmt.Errorf("write ref %s: %w", ref, err)
			}
		}
	}
	lock := file + ".lock"
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write ref %s: %w", ref, err)
	}
	_, werr := f.WriteString(id + "\n")
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(lock, file)
	}
	if werr == nil {
		werr = syncDir(dir)
	}
	if werr != nil {
		os.Remove(lock)
		return fmt.Errorf("write ref %s: %w", ref, werr)
	}
	return nil
}

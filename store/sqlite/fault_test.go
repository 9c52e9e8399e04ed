package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store"
)

func wantFault(t *testing.T, what string, err error, msg string) {
	t.Helper()
	var be *belay.Error
	if !errors.As(err, &be) || be.Code != belay.CodeStorageUnavailable || be.Message != msg {
		t.Errorf("%s: %v; want STORAGE_UNAVAILABLE %q", what, err, msg)
	}
}

// randomState is a JSON string of about n random characters: a large state
// that neither chunk deduplication nor compression shrinks much.
func randomState(n int) json.RawMessage {
	b := make([]byte, n*3/4)
	_, _ = rand.Read(b)
	return json.RawMessage(`"` + base64.StdEncoding.EncodeToString(b) + `"`)
}

func testSession(n int) *belay.Session {
	return &belay.Session{ID: fmt.Sprintf("0190c2a0-0000-7000-8000-%012d", n), Status: belay.SessionRunning}
}

// TestStorageFaults: SQLite's and the OS's storage errors become
// STORAGE_UNAVAILABLE with a message for people (no path, no SQLite text);
// other errors pass unchanged.
func TestStorageFaults(t *testing.T) {
	ctx := t.Context()
	db := mustOpen(t, filepath.Join(t.TempDir(), "belay.db"))
	defer db.Close()

	// SQLITE_FULL: the database may grow no further.
	big := testSession(1)
	big.State = randomState(1 << 20)
	err := db.Update(ctx, func(stx store.Tx) error {
		if _, err := stx.(*tx).q.ExecContext(ctx, "PRAGMA max_page_count = 1"); err != nil {
			return err
		}
		return stx.InsertSession(ctx, big)
	})
	wantFault(t, "SQLITE_FULL", err, msgDiskFull)
	if _, err := db.GetSession(ctx, big.ID); !belay.IsCode(err, belay.CodeSessionNotFound) {
		t.Errorf("GetSession of the session that did not fit: %v", err)
	}
	err = db.Update(ctx, func(stx store.Tx) error {
		if _, err := stx.(*tx).q.ExecContext(ctx, "PRAGMA max_page_count = 4294967294"); err != nil {
			return err
		}
		return stx.InsertSession(ctx, big)
	})
	if err != nil {
		t.Errorf("Update once the database may grow again: %v", err)
	}

	// SQLITE_READONLY: the read pool is query_only.
	_, err = db.reader.q.ExecContext(ctx, `INSERT INTO users (name, created_at) VALUES ('x', 1)`)
	wantFault(t, "SQLITE_READONLY", err, msgReadOnly)

	// SQLITE_CANTOPEN: a file in a directory that does not exist.
	missing, err := openPool(filepath.Join(t.TempDir(), "no", "such", "belay.db"), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer missing.Close()
	wantFault(t, "SQLITE_CANTOPEN", storageFault(missing.PingContext(ctx)), msgCannotOpen)

	for errno, msg := range map[syscall.Errno]string{syscall.ENOSPC: msgDiskFull, syscall.EDQUOT: msgDiskFull, syscall.EFBIG: msgDiskFull,
		syscall.EROFS: msgReadOnly, syscall.EIO: msgIOError} {
		err := fmt.Errorf("sqlite: write: %w", &fs.PathError{Op: "write", Path: "/srv/belay/belay.db", Err: errno})
		f := storageFault(err)
		wantFault(t, errno.Error(), f, msg)
		if !errors.Is(f, errno) {
			t.Errorf("%v does not keep its cause", f)
		}
	}

	for _, err := range []error{nil, sql.ErrNoRows, errors.New("plain"), belay.Errorf(belay.CodeConflict, "x")} {
		if got := storageFault(err); got != err {
			t.Errorf("storageFault(%v) = %v; want it unchanged", err, got)
		}
	}
}

// envFaultDB makes this test binary, run again, the fault helper.
const envFaultDB = "BELAY_SQLITE_FAULT_DB"

// TestFaultHelper is not a test: it is the child process of
// TestIOErrorMidTransaction.
func TestFaultHelper(t *testing.T) {
	path := os.Getenv(envFaultDB)
	if path == "" {
		t.Skip("child process of TestIOErrorMidTransaction")
	}
	if err := faultHelper(path); err != nil {
		fmt.Fprintln(os.Stderr, "fault helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// faultHelper forbids this process to write files (RLIMIT_FSIZE 0: a write
// fails with EFBIG, Go ignores SIGXFSZ), runs a transaction too big for the
// page cache, so SQLite must spill it to the log mid-transaction and fails,
// and has the fn go on after the failure. Then it lifts the limit and writes
// again.
func faultHelper(path string) error {
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return err
	}
	soft := lim.Cur
	lim.Cur = 0
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return err
	}
	var first error
	err = db.Update(ctx, func(stx store.Tx) error {
		for i := range 3 {
			s := testSession(i + 1)
			s.State = randomState(4 << 20)
			if err := stx.InsertSession(ctx, s); err != nil && first == nil {
				first = err // tolerated: the fn goes on
			}
		}
		return nil
	})
	if first == nil || !db.txLost {
		return fmt.Errorf("no statement failed mid-transaction (first error %v); the test does not test its case", first)
	}
	var be *belay.Error
	if !errors.As(err, &be) || be.Code != belay.CodeStorageUnavailable {
		return fmt.Errorf("Update with the writes failing = %v, want STORAGE_UNAVAILABLE", err)
	}
	fmt.Println(be.Message)
	lim.Cur = soft
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return err
	}
	return db.Update(ctx, func(stx store.Tx) error { return stx.InsertSession(ctx, testSession(9)) })
}

// TestIOErrorMidTransaction: a real I/O error in the middle of a transaction
// (SQLite rolls it back) fails the Update with STORAGE_UNAVAILABLE, keeps
// nothing of it, and the database works once the fault is gone.
func TestIOErrorMidTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	mustOpen(t, path).Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultHelper$")
	cmd.Env = append(os.Environ(), envFaultDB+"="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fault helper: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != msgIOError {
		t.Errorf("the failed Update said %q", got)
	}
	db := mustOpen(t, path)
	defer db.Close()
	list, total, _, err := db.ListSessions(t.Context(), store.SessionQuery{Scope: store.Everything, Limit: 10})
	if err != nil || total != 1 || len(list) != 1 || list[0].ID != testSession(9).ID {
		t.Errorf("sessions after the fault: %d, %v; want only the one written after it", total, err)
	}
}

// TestFullDiskMidTransaction: on a real full disk (a small tmpfs, so root
// only), SQLite fails a statement and rolls the whole transaction back. A fn
// that tolerates the error and writes on, after space came back, must not
// have those writes committed on their own (autocommit): the Update fails
// with STORAGE_UNAVAILABLE and keeps nothing, alone on the fast path or
// sharing a batch; the next Update works.
func TestFullDiskMidTransaction(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "Alone", true: "Shared"}[shared], func(t *testing.T) {
			dir := testutil.SmallDisk(t)
			ctx := t.Context()
			db := mustOpen(t, filepath.Join(dir, "belay.db"))
			defer db.Close()
			ballast := filepath.Join(dir, "ballast")
			fill(t, ballast)

			// Shared: the first Update holds the writer until the two
			// after it are queued, so they share one batch.
			release, first := make(chan struct{}), make(chan error, 1)
			if shared {
				go func() { first <- db.Update(ctx, func(store.Tx) error { <-release; return nil }) }()
				for db.queued.Load() != 0 || len(db.turn) == 0 {
					runtime.Gosched()
				}
			}
			big, late := testSession(1), testSession(2)
			// Random: large states are chunked, deduplicated and compressed.
			pad := make([]byte, 2<<20)
			_, _ = rand.Read(pad)
			big.State = []byte(`"` + hex.EncodeToString(pad) + `"`)
			lost, failed := false, make(chan error, 1)
			go func() {
				failed <- db.Update(ctx, func(stx store.Tx) error {
					if err := stx.InsertSession(ctx, big); err == nil {
						t.Error("InsertSession of 4 MiB on a full disk succeeded")
					}
					lost = db.txLost
					if err := os.Remove(ballast); err != nil {
						t.Error(err)
					}
					stx.InsertSession(ctx, late)
					stx.AppendEvent(ctx, &belay.Event{Type: belay.EventSessionCreated, SessionID: late.ID})
					return nil
				})
			}()
			var other error
			if shared {
				for db.queued.Load() != 1 {
					runtime.Gosched()
				}
				after := make(chan error, 1)
				go func() { after <- db.Update(ctx, func(store.Tx) error { return nil }) }()
				// The writer took the failing Update and waits for its turn;
				// the other must be handing its write over (not merely
				// counted as queued) when the turn comes, or it lands in a
				// batch of its own.
				for sendingUpdates() != 1 {
					runtime.Gosched()
				}
				close(release)
				if err := <-first; err != nil {
					t.Errorf("first Update: %v", err)
				}
				other = <-after
			}
			err := <-failed
			if !lost {
				t.Fatal("SQLite did not roll the transaction back; the test does not test its case")
			}
			wantFault(t, "Update on a full disk", err, msgDiskFull)
			if shared && other == nil {
				t.Error("the other Update of the lost batch got no error")
			}
			for _, id := range []string{big.ID, late.ID} {
				if _, err := db.GetSession(ctx, id); !belay.IsCode(err, belay.CodeSessionNotFound) {
					t.Errorf("GetSession(%s) after the lost transaction: %v; want SESSION_NOT_FOUND", id, err)
				}
			}
			if n, err := db.LastEventSeq(ctx); err != nil || n != 0 {
				t.Errorf("LastEventSeq = %d, %v; want 0: a write after the loss was kept", n, err)
			}
			if err := db.Update(ctx, func(stx store.Tx) error { return stx.InsertSession(ctx, late) }); err != nil {
				t.Errorf("Update once the disk has room: %v", err)
			}
		})
	}
}

// fill writes path until its file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); errors.Is(err, syscall.ENOSPC) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// sendingUpdates counts the Update calls waiting to hand their write to the
// writer goroutine (in Update's select on db.writes).
func sendingUpdates() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, " [select") && strings.Contains(g, "sqlite.(*DB).Update(") && !strings.Contains(g, "sqlite.(*pendingWrite).outcome(") {
			n++
		}
	}
	return n
}

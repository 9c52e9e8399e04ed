package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"database/sql"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testutil"
	"github.com/belayhq/belay/store/postgres"
)


// A server that refuses connections is STORAGE_UNAVAILABLE with a message
// for a person, not a driver's dial error.
func TestUnreachableServerIsStorageUnavailable(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	be := testutil.WantCode(t, err, belay.CodeStorageUnavailable)
	if !strings.Contains(be.Message, "cannot be reached") || strings.Contains(be.Message, "127.0.0.1") {
		t.Errorf("message = %q, want one saying the server cannot be reached, without its address", be.Message)
	}
}

// Writes to a read-only server (a standby, default_transaction_read_only)
// are STORAGE_UNAVAILABLE, reads go on, and the health report says so.
func TestReadOnlyServerIsStorageUnavailable(t *testing.T) {
	u := freshSchema(t)
	rw, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	svc := core.New(core.Options{Store: rw})
	sess, err := svc.CreateSession(admin, belay.CreateSessionInput{ProjectPath: t.TempDir(), Title: "before"})
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()

	ro, err := postgres.Open(t.Context(), u+"&default_transaction_read_only=on")
	if err != nil {
		t.Fatalf("opening a migrated database read-only: %v", err)
	}
	defer ro.Close()
	svc = core.New(core.Options{Store: ro})
	defer svc.Close()
	_, err = svc.CreateCheckpoint(admin, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "refused", AgentState: []byte(`{}`)})
	be := testutil.WantCode(t, err, belay.CodeStorageUnavailable)
	if !strings.Contains(be.Message, "read-only") {
		t.Errorf("message = %q, want it to say the database is read-only", be.Message)
	}
	if got, err := svc.GetSession(admin, sess.ID); err != nil || got.Title != "before" {
		t.Errorf("a read on a read-only server = %+v, %v; want the session", got, err)
	}
	testutil.WantCode(t, svc.Health(t.Context()), belay.CodeStorageUnavailable)
}

// A full disk under the database's tables is STORAGE_UNAVAILABLE, the
// failed write leaves nothing behind, and what was saved before reads back.
// The tables live in a tablespace on a 3 MB tmpfs, which needs root and a
// server on this machine; elsewhere the test is skipped.
func TestFullDiskIsStorageUnavailable(t *testing.T) {
	u := freshSchema(t)
	dir := tmpfs(t, "3m")
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user to own a tablespace: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Skipf("chown tablespace: %v", err)
	}
	super, err := sql.Open("pgx", testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close()
	space := "belay_full_" + strconv.Itoa(os.Getpid())
	if _, err := super.ExecContext(t.Context(), "CREATE TABLESPACE "+space+" LOCATION '"+dir+"'"); err != nil {
		t.Skipf("create tablespace (needs a superuser and a server on this machine): %v", err)
	}
	t.Cleanup(func() {
		// The schema (dropped by freshSchema's cleanup, registered first,
		// so run after this one) holds the tables: drop them here.
		_, _ = super.ExecContext(context.Background(), "DROP SCHEMA "+schemaOf(t, u)+" CASCADE")
		_, _ = super.ExecContext(context.Background(), "DROP TABLESPACE "+space)
	})

	db, err := postgres.Open(t.Context(), u+"&default_tablespace="+space)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})
	defer svc.Close()
	ctx := admin
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Random, so that TOAST's compression cannot shrink it.
	pad := make([]byte, 100_000)
	saved := 0
	var state []byte
	for ; saved < 200; saved++ {
		_, _ = rand.Read(pad)
		state = []byte(`{"pad":"` + hex.EncodeToString(pad) + `"}`)
		if _, err = svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "fill " + strconv.Itoa(saved), AgentState: state}); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatalf("%d checkpoints of 200 KB fit on a 3 MB disk", saved)
	}
	t.Logf("the disk filled after %d checkpoints: %v", saved, err)
	be := testutil.WantCode(t, err, belay.CodeStorageUnavailable)
	if !strings.Contains(be.Message, "disk is full") || strings.Contains(be.Message, dir) {
		t.Errorf("message = %q, want one saying the disk is full, without a path", be.Message)
	}
	list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: sess.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if list.TotalCount != int64(saved) {
		t.Errorf("%d checkpoints listed, want the %d acknowledged before the disk filled", list.TotalCount, saved)
	}
	if saved > 0 {
		cp, err := svc.GetCheckpoint(ctx, list.Items[0].ID)
		if err != nil || len(cp.AgentState) != len(state) {
			t.Errorf("a checkpoint saved before the disk filled reads back as %v", err)
		}
	}
}

// tmpfs mounts a tmpfs of size on a new directory for the test, or skips it
// where mounting is not allowed.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := filepath.Join(os.TempDir(), "belay-full-"+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		os.Remove(dir)
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("umount", dir).Run()
		os.Remove(dir)
	})
	return dir
}

// schemaOf is the schema a freshSchema URL selects.
func schemaOf(t *testing.T, u string) string {
	t.Helper()
	i := strings.Index(u, "search_path=")
	if i < 0 {
		t.Fatalf("no search_path in %s", u)
	}
	return strings.SplitN(u[i+len("search_path="):], "&", 2)[0]
}

package postgres_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	u := testutil.PostgresSchema(t)
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
// The tables live in a tablespace on a 3 MB tmpfs of a PostgreSQL server the
// test starts for itself (never the shared one: a server whose tablespace
// fills or vanishes may stop). That needs root, the server's binaries and
// mount; elsewhere the test is skipped.
func TestFullDiskIsStorageUnavailable(t *testing.T) {
	testutil.PostgresURL(t)
	srv := privateServer(t)
	space := srv.tmpfs(t, "3m")
	if out, err := srv.psql("CREATE TABLESPACE full_disk LOCATION '" + space + "'"); err != nil {
		t.Fatalf("create tablespace: %v: %s", err, out)
	}
	db, err := postgres.Open(t.Context(), srv.url+"&default_tablespace=full_disk")
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
	if !strings.Contains(be.Message, "disk is full") || strings.Contains(be.Message, space) {
		t.Errorf("message = %q, want one saying the disk is full, without a path", be.Message)
	}
	list, err := svc.ListCheckpoints(ctx, belay.ListCheckpointsInput{SessionID: sess.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if list.TotalCount != int64(saved) {
		t.Errorf("%d checkpoints listed, want the %d acknowledged before the disk filled", list.TotalCount, saved)
	}
	if saved == 0 {
		t.Fatal("the disk was full before the first checkpoint: nothing to read back")
	}
	cp, err := svc.GetCheckpoint(ctx, list.Items[0].ID)
	if err != nil || len(cp.AgentState) != len(state) {
		t.Errorf("a checkpoint saved before the disk filled reads back as %v", err)
	}
	testutil.WantCode(t, svc.Health(t.Context()), belay.CodeStorageUnavailable)
}

// server is a PostgreSQL server of one test.
type server struct {
	url   string
	owner *user.User
	bin   string
	sock  string
	port  string
	// mounts are unmounted after the server has stopped.
	mounts []string
}

// psql runs sql on the server as its superuser.
func (s *server) psql(sql string) ([]byte, error) {
	return s.as(filepath.Join(s.bin, "psql"), "-h", s.sock, "-p", s.port, "-d", "postgres", "-Atc", sql)
}

func (s *server) as(name string, args ...string) ([]byte, error) {
	return exec.Command("runuser", append([]string{"-u", s.owner.Username, "--", name}, args...)...).CombinedOutput()
}

// privateServer initialises and starts a PostgreSQL server in a temporary
// directory, run by the postgres user on a free loopback port, and stops it
// when the test ends.
func privateServer(t *testing.T) *server {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private server and a small tmpfs need root")
	}
	bin, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Skipf("no PostgreSQL binaries (pg_config): %v", err)
	}
	owner, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user to run a server: %v", err)
	}
	s := &server{owner: owner, bin: strings.TrimSpace(string(bin))}
	dir, err := os.MkdirTemp("", "belay-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	chown(t, dir, owner)
	data := filepath.Join(dir, "data")
	s.sock = dir
	if out, err := s.as(filepath.Join(s.bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		t.Skipf("initdb: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := exec.Command("runuser", "-u", owner.Username, "--", filepath.Join(s.bin, "postgres"), "-D", data,
		"-p", s.port, "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	srv.Stdout, srv.Stderr = io.Discard, io.Discard
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Immediate shutdown: the server and its data are thrown away.
		_, _ = s.as(filepath.Join(s.bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
		_ = srv.Wait()
		for _, m := range s.mounts {
			_ = exec.Command("umount", m).Run()
			os.Remove(m)
		}
	})
	for i := 0; ; i++ {
		if out, err := s.as(filepath.Join(s.bin, "pg_isready"), "-h", s.sock, "-p", s.port); err == nil {
			break
		} else if i == 100 {
			t.Fatalf("private server did not start: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.url = "postgres://postgres@127.0.0.1:" + s.port + "/postgres?sslmode=disable"
	return s
}

// tmpfs mounts a tmpfs of size, owned by the server's user, on a new
// directory, unmounted after the server has stopped.
func (s *server) tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "belay-full-")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		os.Remove(dir)
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	s.mounts = append(s.mounts, dir)
	chown(t, dir, s.owner)
	return dir
}

func chown(t *testing.T, path string, owner *user.User) {
	t.Helper()
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(owner.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

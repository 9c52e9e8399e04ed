package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
)

// The helper process is this test binary run again with these variables set.
const (
	envRole = "BELAY_SQLITE_HELPER_ROLE" // "writer": open, wait, write; "opener": wait, open, write; "acker": see ackUntilKilled; "saver": see saveInto
	envDB   = "BELAY_SQLITE_HELPER_DB"
	envN    = "BELAY_SQLITE_HELPER_N"
	envTag  = "BELAY_SQLITE_HELPER_TAG"
)

// TestHelperProcess is not a test: it is the child process of the tests below.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("child process of the multi-process tests")
	}
	if err := helper(role, os.Getenv(envDB), os.Getenv(envN), os.Getenv(envTag)); err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", os.Getenv(envTag), err)
		os.Exit(1)
	}
	os.Exit(0)
}

// helper writes n transactions of one session and one event each. It prints
// "ready" and waits for a line on stdin before the part that must overlap
// with the other process: the writes, or for an opener the Open too.
func helper(role, path, count, tag string) error {
	ctx := context.Background()
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	barrier := func() error {
		fmt.Println("ready")
		_, err := bufio.NewReader(os.Stdin).ReadString('\n')
		return err
	}
	var db *sqlite.DB
	switch role {
	case "acker":
		return ackUntilKilled(ctx, path, n)
	case "saver":
		return saveInto(ctx, path, tag, n, barrier)
	case "writer":
		if db, err = sqlite.Open(ctx, path); err != nil {
			return err
		}
		if err := barrier(); err != nil {
			return err
		}
	case "opener":
		if err := barrier(); err != nil {
			return err
		}
		if db, err = sqlite.Open(ctx, path); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	defer db.Close()
	for i := range n {
		err := db.Update(ctx, func(tx store.Tx) error {
			now := time.Now().UTC()
			s := &belay.Session{ID: uuid.NewString(), ProjectPath: "/" + tag, Title: fmt.Sprintf("%s %d", tag, i),
				Status: belay.SessionRunning, CreatedAt: now, UpdatedAt: now}
			if err := tx.InsertSession(ctx, s); err != nil {
				return err
			}
			return tx.AppendEvent(ctx, &belay.Event{Type: belay.EventSessionCreated, SessionID: s.ID, CreatedAt: now})
		})
		if err != nil {
			return fmt.Errorf("transaction %d: %w", i, err)
		}
	}
	return db.Close()
}

// saveInto saves n checkpoints into session id through core, as belay's
// processes do, each summary naming the process.
func saveInto(ctx context.Context, path, id string, n int, barrier func() error) error {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})
	defer svc.Close()
	if err := barrier(); err != nil {
		return err
	}
	ctx = belay.WithActor(ctx, belay.Actor{UserID: "test", Admin: true})
	for i := range n {
		_, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: id, Summary: fmt.Sprintf("%d %d", os.Getpid(), i),
			Type: belay.TypeAuto, Trigger: belay.TriggerPeriodic, AgentState: []byte(`{"i":1}`)})
		if err != nil {
			return fmt.Errorf("save %d: %w", i, err)
		}
	}
	return db.Close()
}

// ackUntilKilled opens the database and, on n goroutines, saves sessions
// until the process is killed, printing each session's id once its Update
// returned: a write the parent is told of is acknowledged.
func ackUntilKilled(ctx context.Context, path string, n int) error {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	var mu sync.Mutex
	errs := make(chan error, n)
	for range n {
		go func() {
			for {
				now := time.Now().UTC()
				s := &belay.Session{ID: uuid.NewString(), ProjectPath: "/acked", Status: belay.SessionRunning, CreatedAt: now, UpdatedAt: now}
				err := db.Update(ctx, func(tx store.Tx) error {
					if err := tx.InsertSession(ctx, s); err != nil {
						return err
					}
					return tx.AppendEvent(ctx, &belay.Event{Type: belay.EventSessionCreated, SessionID: s.ID, CreatedAt: now})
				})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fmt.Println("acked", s.ID)
				mu.Unlock()
			}
		}()
	}
	return <-errs
}

type child struct {
	tag    string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
}

// runHelpers starts one helper process per tag, waits until all are ready,
// releases them at once and waits for them to finish.
func runHelpers(t *testing.T, role, path string, n int, tags ...string) {
	t.Helper()
	var children []*child
	for _, tag := range tags {
		c := &child{tag: tag}
		c.cmd = exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		c.cmd.Env = append(os.Environ(), envRole+"="+role, envDB+"="+path, envN+"="+strconv.Itoa(n), envTag+"="+tag)
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			t.Fatalf("start helper %s: %v", tag, err)
		}
		children = append(children, c)
	}
	for _, c := range children {
		for {
			line, err := c.stdout.ReadString('\n')
			if err != nil {
				c.cmd.Wait()
				t.Fatalf("helper %s did not get ready: %v\n%s", c.tag, err, c.stderr.String())
			}
			if strings.TrimSpace(line) == "ready" {
				break
			}
		}
	}
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
		c.stdin.Close()
	}
	for _, c := range children {
		io.Copy(io.Discard, c.stdout)
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("helper %s: %v\n%s", c.tag, err, c.stderr.String())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// checkWrites verifies n sessions per tag and one gap-free event sequence.
func checkWrites(t *testing.T, db *sqlite.DB, n int, tags ...string) {
	t.Helper()
	ctx := t.Context()
	total := n * len(tags)
	for _, tag := range tags {
		_, count, _, err := db.ListSessions(ctx, store.SessionQuery{Scope: store.Everything, ProjectPath: "/" + tag, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if count != int64(n) {
			t.Errorf("helper %s left %d sessions, want %d", tag, count, n)
		}
	}
	events, err := db.ListEvents(ctx, store.EventQuery{Scope: store.Everything, Limit: total + 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != total {
		t.Fatalf("%d events, want %d", len(events), total)
	}
	var projects []string
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the sequence has a gap or a duplicate", i+1, e.Seq)
		}
		s, err := db.GetSession(ctx, e.SessionID)
		if err != nil {
			t.Fatalf("session of event %d: %v", e.Seq, err)
		}
		projects = append(projects, s.ProjectPath)
	}
	if last, err := db.LastEventSeq(ctx); err != nil || last != int64(total) {
		t.Errorf("LastEventSeq = %d, %v; want %d", last, err, total)
	}
	// How often the log switches writer: 1 means one process waited out the
	// other's whole run (busy_timeout), more means they interleaved.
	t.Logf("writer switches in the event log: %d", len(slices.Compact(projects))-1)
}

// TestMultiProcessWriters: two processes write the same database at once;
// WAL, busy_timeout and BEGIN IMMEDIATE make every transaction succeed and
// keep the event sequence gap-free.
func TestMultiProcessWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const n = 200
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runHelpers(t, "writer", path, n, "a", "b")
	checkWrites(t, db, n, "a", "b")
}

// TestAcknowledgedWritesSurviveKill: a process saving on 8 goroutines at
// once (group commit, the log synced beside the writer) is killed with
// SIGKILL mid-stream, three times over the same database; every write it
// acknowledged is there when the database is opened again, with its event,
// and the event sequence has no gap.
func TestAcknowledgedWritesSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	path := filepath.Join(t.TempDir(), "belay.db")
	var acked []string
	for round := range 3 {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envRole+"=acker", envDB+"="+path, envN+"=8", envTag+"=acker")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		killAt := 200 + 150*round
		seen := 0
		for lines.Scan() {
			id, ok := strings.CutPrefix(lines.Text(), "acked ")
			if !ok {
				continue
			}
			acked = append(acked, id)
			if seen++; seen == killAt {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		if seen < killAt {
			t.Fatalf("round %d: the child stopped after %d acknowledged writes: %v\n%s", round, seen, err, stderr.String())
		}
	}
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range acked {
		if _, err := db.GetSession(t.Context(), id); err != nil {
			t.Fatalf("acknowledged session %s: %v", id, err)
		}
	}
	events, err := db.ListEvents(t.Context(), store.EventQuery{Scope: store.Everything, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]bool{}
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the sequence has a gap", i+1, e.Seq)
		}
		sessions[e.SessionID] = true
	}
	for _, id := range acked {
		if !sessions[id] {
			t.Fatalf("acknowledged session %s has no event", id)
		}
	}
	t.Logf("%d acknowledged writes of %d stored survived three kills", len(acked), len(events))
}

// TestMultiProcessOpenNew: two processes create and migrate the same new
// database at the same moment; the migration lock makes both succeed.
func TestMultiProcessOpenNew(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const n = 10
	for round := range 3 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("new-%d", round), "belay.db")
		runHelpers(t, "opener", path, n, "a", "b")
		db, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		checkWrites(t, db, n, "a", "b")
		db.Close()
	}
}

// TestMultiProcessSavesOneSession: two processes save into the same session
// at once. Each process's writer caches the session's head between its saves;
// the other's commits must make it read the head again, so the checkpoints
// number 1 to 2n without a gap or a conflict, each the child of the one
// before.
func TestMultiProcessSavesOneSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const n = 200
	path := filepath.Join(t.TempDir(), "belay.db")
	ctx, db, svc, sess := sqlite.OpenWithSession(t, path)
	runHelpers(t, "saver", path, n, sess.ID, sess.ID)

	got, err := svc.GetSession(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastSeq != 2*n || got.CheckpointCount != 2*n {
		t.Fatalf("session at seq %d with %d checkpoints, want %d", got.LastSeq, got.CheckpointCount, 2*n)
	}
	parent, switches, last := "", 0, ""
	for seq := int64(1); seq <= 2*n; seq++ {
		cp, err := db.GetCheckpointBySeq(ctx, sess.ID, seq)
		if err != nil {
			t.Fatalf("checkpoint #%d: %v", seq, err)
		}
		if cp.ParentID != parent {
			t.Fatalf("checkpoint #%d has parent %q, want %q", seq, cp.ParentID, parent)
		}
		parent = cp.ID
		if pid, _, _ := strings.Cut(cp.Summary, " "); pid != last {
			switches, last = switches+1, pid
		}
	}
	if got.HeadCheckpointID != parent {
		t.Errorf("session head %s, want the last checkpoint %s", got.HeadCheckpointID, parent)
	}
	// 1 means one process waited out the other's whole run: the cache was
	// never put to the test.
	t.Logf("process switches along the session: %d", switches-1)
	if switches-1 < 2 {
		t.Errorf("the processes took turns only %d times", switches-1)
	}
}

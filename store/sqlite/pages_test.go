package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
)

// TestWALPagesPerCheckpoint counts the WAL pages a checkpoint saved through
// core writes on its own (2 KB state, one tag, a session 200 checkpoints
// in): the write path's cost in I/O, which a schema change must not raise
// unnoticed: 10.15 since 00021 (a tag row 8 bytes longer: a split more in
// these 40 saves, none over 300), 9.88 since states over 1 KiB are kept
// compressed (this one to a few dozen bytes; 12.79 before), 11.65 since
// 00017, 12.68 since 00016,
// 14.07 since 00015, 15.2 since 00014, 17.05 since 00013, 20.8 before.
func TestWALPagesPerCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	ctx, _, svc, sess := OpenWithSession(t, path)
	state := []byte(`{"k":"` + strings.Repeat("x", 2040) + `"}`)
	save := func(i int) {
		t.Helper()
		_, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: fmt.Sprint("step ", i),
			Type: belay.TypeAuto, Trigger: belay.TriggerPeriodic, AgentState: state, Tags: []string{"bench"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		save(i)
	}
	raw, err := openPool(path, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var busy, logged, done int
	if err := raw.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil || busy != 0 {
		t.Fatalf("truncate the WAL: busy %d, %v", busy, err)
	}
	// Fewer saves than fill the WAL to its automatic checkpoint (1,000 pages).
	const saves = 40
	for i := range saves {
		save(200 + i)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	const header, frame = 32, 24 + 4096
	perSave := float64((fi.Size()-header)/frame) / saves
	t.Logf("%.2f WAL pages per checkpoint", perSave)
	if perSave > 10.5 {
		t.Errorf("a checkpoint writes %.2f WAL pages, want at most 10.5", perSave)
	}
}

// OpenWithSession opens the database at path with a core service on it, as
// an admin, and creates one session; the test closes both. The tests of
// package sqlite_test use it too.
func OpenWithSession(t *testing.T, path string) (context.Context, *DB, *core.Service, *belay.Session) {
	t.Helper()
	ctx := belay.WithActor(t.Context(), belay.Actor{UserID: "test", Admin: true})
	db := mustOpen(t, path)
	t.Cleanup(func() { db.Close() })
	svc := core.New(core.Options{Store: db})
	t.Cleanup(svc.Close)
	sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, db, svc, sess
}

package core_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// wsEnv is a service with workspace snapshots over a fresh data directory,
// and a project directory outside it.
type wsEnv struct {
	svc     *core.Service
	db      *sqlite.DB
	ws      *workspace.Manager
	data    string
	project string
}

func newWSEnv(tb testing.TB) *wsEnv {
	tb.Helper()
	e := &wsEnv{data: tb.TempDir(), project: tb.TempDir()}
	var err error
	if e.db, err = sqlite.Open(localCtx, filepath.Join(e.data, "belay.db")); err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { e.db.Close() })
	if e.ws, err = workspace.New(workspace.Options{DataDir: e.data}); err != nil {
		tb.Fatalf("workspace manager: %v", err)
	}
	// Alice is no admin: she works on projects under the test's directory.
	e.svc = core.New(core.Options{Store: e.db, Workspaces: e.ws, WorkspaceRoots: []string{filepath.Dir(e.project)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return e
}

// wsAs is a context acting as user.
func wsAs(user string, admin bool) context.Context {
	return belay.WithActor(context.Background(), belay.Actor{UserID: user, Admin: admin})
}

// alice owns the sessions the tests create; she is not an admin.
var alice = wsAs("alice", false)

// save saves a checkpoint of e.project with a snapshot, as alice.
func (e *wsEnv) save(tb testing.TB, summary string, opts ...func(*belay.CreateCheckpointInput)) *belay.Checkpoint {
	tb.Helper()
	in := belay.CreateCheckpointInput{ProjectPath: e.project, Summary: summary, Snapshot: true}
	for _, o := range opts {
		o(&in)
	}
	cp, err := e.svc.CreateCheckpoint(alice, in)
	if err != nil {
		tb.Fatalf("save %q: %v", summary, err)
	}
	return cp
}

// rollback restores a checkpoint as alice.
func (e *wsEnv) rollback(tb testing.TB, cp *belay.Checkpoint) *belay.RestoreResult {
	tb.Helper()
	res, err := e.svc.RestoreCheckpoint(alice, belay.RestoreInput{CheckpointID: cp.ID})
	if err != nil {
		tb.Fatalf("rollback to #%d: %v", cp.Seq, err)
	}
	return res
}

func wsRemove(tb testing.TB, root string, names ...string) {
	tb.Helper()
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(name))); err != nil {
			tb.Fatal(err)
		}
	}
}

// wsTamper rewrites a stored checkpoint behind the service's back.
func wsTamper(tb testing.TB, st store.Store, id string, change func(*belay.Checkpoint)) {
	tb.Helper()
	err := st.Update(localCtx, func(tx store.Tx) error {
		cp, err := tx.GetCheckpoint(localCtx, id)
		if err != nil {
			return err
		}
		change(cp)
		if err := tx.DeleteCheckpoint(localCtx, id); err != nil {
			return err
		}
		return tx.InsertCheckpoint(localCtx, cp)
	})
	if err != nil {
		tb.Fatalf("tamper with %s: %v", id, err)
	}
}

// hookStore calls hook before each Update with the call's number (from 1);
// an error from hook fails that Update.
type hookStore struct {
	store.Store
	calls atomic.Int32
	hook  func(call int32) error
}

func (h *hookStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := h.hook(h.calls.Add(1)); err != nil {
		return err
	}
	return h.Store.Update(ctx, fn)
}

// withStoreHook returns a service on e's store and workspaces whose writes
// call hook first.
func (e *wsEnv) withStoreHook(hook func(call int32) error) *core.Service {
	return e.over(&hookStore{Store: e.db, hook: hook})
}

// over returns a service like e.svc on st, a store wrapping e's.
func (e *wsEnv) over(st store.Store) *core.Service {
	return core.New(core.Options{Store: st, Workspaces: e.ws, WorkspaceRoots: []string{filepath.Dir(e.project)},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// withFlakyStore returns a service whose failAt-th write fails with an error
// without code.
func (e *wsEnv) withFlakyStore(failAt int32) *core.Service {
	return e.withStoreHook(func(call int32) error {
		if call == failAt {
			return errors.New("disk full")
		}
		return nil
	})
}

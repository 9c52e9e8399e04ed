//go:build unix

package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// workspaceLock serialises work on one workspace inside this process; the
// flock on DataDir/workspaces/<key>/lock serialises it across processes.
type workspaceLock struct {
	token chan struct{} // holds one value while unlocked
	file  *os.File      // the flocked file while held; guarded by Manager.mu
}

// Lock takes the exclusive lock of the workspace at root, waiting until it is
// free or ctx is done. It is held across goroutines of this process and
// across processes sharing DataDir (flock on the shadow directory's lock
// file). Snapshot, Restore and Diff take it themselves; a caller that needs
// several steps without another writer in between ("snapshot, then
// restore") holds it and calls SnapshotLocked and RestoreLocked. The lock is
// not reentrant. Call unlock exactly once.
//
// Every git command run under the lock inherits the locked file, so the lock
// stays held until the last of them exits, even when the process holding it
// dies first: whoever gets the lock knows that no git command is working on
// the shadow repository, and that lock files git left there are stale.
func (m *Manager) Lock(ctx context.Context, root string) (unlock func(), err error) {
	s, err := m.workspaceFor(ctx, root)
	if err != nil {
		return nil, err
	}
	return m.lock(ctx, s)
}

func (m *Manager) lock(ctx context.Context, s *shadow) (func(), error) {
	m.mu.Lock()
	wl := m.locks[s.key]
	if wl == nil {
		wl = &workspaceLock{token: make(chan struct{}, 1)}
		wl.token <- struct{}{}
		m.locks[s.key] = wl
	}
	m.mu.Unlock()

	select {
	case <-wl.token:
	case <-ctx.Done():
		return nil, fmt.Errorf("lock workspace %s: %w", s.root, ctx.Err())
	}
	f, err := flock(ctx, s)
	if err != nil {
		wl.token <- struct{}{}
		return nil, err
	}
	m.mu.Lock()
	wl.file = f
	m.mu.Unlock()
	s.lockFile = f
	return func() {
		s.lockFile = nil
		m.mu.Lock()
		wl.file = nil
		m.mu.Unlock()
		// Closing the descriptor releases the flock (once git commands that
		// inherited it are gone too).
		f.Close()
		wl.token <- struct{}{}
	}, nil
}

// held reports whether this Manager holds the lock of s (used to catch a
// *Locked call made without Lock) and, when it does, lets git commands run
// for s inherit it.
func (m *Manager) held(s *shadow) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	wl := m.locks[s.key]
	if wl == nil || wl.file == nil {
		return false
	}
	s.lockFile = wl.file
	return true
}

// flock opens the lock file and takes an exclusive flock on it. flock has no
// timeout, so while another process holds it we retry without blocking, with
// a short backoff, until ctx is done.
func flock(ctx context.Context, s *shadow) (*os.File, error) {
	path := filepath.Join(s.dir, "lock")
	f, err := openLock(s, path)
	if err != nil {
		return nil, err
	}
	backoff := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if current(f, path) {
				return f, nil
			}
			// The shadow directory was removed while we waited (see
			// removeShadow): lock the one that takes its place.
			f.Close()
			if f, err = openLock(s, path); err != nil {
				return nil, err
			}
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock workspace %s: %w", s.root, err)
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			f.Close()
			return nil, fmt.Errorf("lock workspace %s: %w", s.root, ctx.Err())
		case <-timer.C:
		}
		backoff = min(2*backoff, 50*time.Millisecond)
	}
}

func openLock(s *shadow, path string) (*os.File, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create shadow directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open workspace lock: %w", err)
	}
	return f, nil
}

// current reports whether f is still the lock file at path.
func current(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(held, now)
}

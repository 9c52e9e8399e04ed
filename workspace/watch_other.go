//go:build !linux

package workspace

import "context"

// treeWatcher is not available here: snapshots scan the whole tree.
type treeWatcher struct{}

func (w *treeWatcher) settle(uint64, indexID, bool) {}
func (w *treeWatcher) invalidate()                  {}
func (w *treeWatcher) close() error                 { return nil }

// claimChanges returns nil: there is no watcher on this system.
func (m *Manager) claimChanges(context.Context, *shadow) *changeClaim { return nil }

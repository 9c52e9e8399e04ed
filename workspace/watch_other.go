//go:build !linux

package workspace

import (
	"context"
	"errors"
)

// treeWatcher is not available here: snapshots scan the whole tree.
type treeWatcher struct{}

// remoteClaim is not available here either.
type remoteClaim struct{}

func (rc *remoteClaim) settle(uint64, indexID, bool, string, string) {}
func (rc *remoteClaim) abandon()                                     {}

// ServeWatch fails: file-system watchers need Linux (inotify).
func (m *Manager) ServeWatch(context.Context, string, func()) error {
	return errors.New("watching a workspace needs Linux (inotify)")
}

func (w *treeWatcher) settle(uint64, indexID, bool, string, string) {}
func (w *treeWatcher) abandon()                                     {}
func (w *treeWatcher) close() error                                 { return nil }

// readIndexID returns the zero value: there are no watchers to compare it.
func readIndexID(*shadow) indexID { return indexID{} }

// claimChanges returns nil: there is no watcher on this system.
func (m *Manager) claimChanges(context.Context, *shadow) *changeClaim { return nil }

func (m *Manager) watchInvalidate(*shadow)                   {}
func (m *Manager) watchIndexWritten(*shadow, fileID, fileID) {}

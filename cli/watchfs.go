package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"
)

// WatchFSConfig says which workspaces `belay watch-fs` watches.
type WatchFSConfig struct {
	// DataDir holds the workspaces' shadow repositories.
	DataDir string
	// Roots are the workspaces' absolute paths.
	Roots []string
	// Ready is called once for each root when its watcher serves, from any
	// goroutine.
	Ready func(root string)
}

func (a *app) watchFSCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watch-fs [DIR...]",
		Short: "Watch workspaces so that saves look only at the files that changed",
		Long: `Keep a file-system watcher (inotify, Linux only) on each workspace named
(default: the project's), until interrupted. While it runs, every 'belay save'
of those workspaces on this data directory asks it which paths changed since
the previous save and looks only at them instead of checking every file, which
in a large tree is most of a save's time.

'belay serve' keeps such a watcher on each workspace it snapshots by itself;
watch-fs is for working with the CLI alone (an agent calling 'belay save' or
'belay mcp'). Without either, saves check every file, as before.

A save scans the whole tree anyway whenever the watcher cannot vouch for its
list: the first save after watch-fs starts, after its event queue overflowed,
a directory was moved, a .gitignore or .belayignore changed, a rollback or
'belay gc' rewrote the snapshot index, or a save failed. Network and FUSE file
systems, and trees beyond the inotify watch limit (fs.inotify.max_user_watches,
one watch per directory), are not watched. Changes made through a memory
mapping (mmap) produce no events: do not watch a tree written that way.

With --json each workspace is announced as one line {"watching": DIR}.`,
		Example: `  belay watch-fs &                  # the project's workspace, in the background
  belay watch-fs ~/agents/a ~/agents/b`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if a.env.Backend.WatchFS == nil {
				return errors.New("this build of belay cannot watch workspaces")
			}
			if a.env.Getenv("BELAY_URL") != "" {
				return usagef("with BELAY_URL the server takes the snapshots: belay serve watches its workspaces itself")
			}
			ctx := a.ctx(cmd)
			dataDir, err := a.resolveDataDir()
			if err != nil {
				return err
			}
			var roots []string
			for _, d := range dirs {
				p, err := a.absPath(d)
				if err != nil {
					return err
				}
				roots = append(roots, p)
			}
			if len(roots) == 0 {
				svc, err := a.service(ctx)
				if err != nil {
					return err
				}
				p, err := a.project(ctx, svc)
				if err != nil {
					return err
				}
				roots = []string{p}
			}
			var mu sync.Mutex
			ready := func(root string) {
				mu.Lock()
				defer mu.Unlock()
				if a.json {
					b, _ := json.Marshal(map[string]string{"watching": root}) // strings: cannot fail
					fmt.Fprintf(a.env.Stdout, "%s\n", b)
					return
				}
				fmt.Fprintf(a.env.Stdout, "Watching %s: saves there look only at what changed. Interrupt to stop.\n", root)
			}
			return a.env.Backend.WatchFS(ctx, WatchFSConfig{DataDir: dataDir, Roots: roots, Ready: ready})
		},
	}
}

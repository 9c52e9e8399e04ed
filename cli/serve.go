package cli

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// DefaultAddr is where `belay serve` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7420"

func (a *app) serveCommand() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API on the local database",
		Long: `Serve belay's HTTP API (/v1), /healthz, /metrics and the web dashboard (/)
on the embedded database.
Stops gracefully on SIGINT or SIGTERM, finishing requests in flight.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serve(cmd.Context(), addr)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", DefaultAddr, "address to listen on")
	cmd.Flags().StringArrayVar(&a.roots, "workspace-root", nil, "directory under which users other than admins may snapshot and restore workspaces (repeatable)")
	return cmd
}

func (a *app) serve(ctx context.Context, addr string) error {
	if a.env.Backend.Serve == nil {
		return errors.New("this build of belay cannot serve")
	}
	cfg, err := a.localConfig()
	if err != nil {
		return err
	}
	if cfg.SavesPerMinute, err = a.savesPerMinute(); err != nil {
		return err
	}
	return a.env.Backend.Serve(ctx, ServeConfig{Local: cfg, Addr: addr, Version: version(), Stdout: a.env.Stdout, Stderr: a.env.Stderr})
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print belay's version",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			info := map[string]string{"version": version()}
			if bi, ok := debug.ReadBuildInfo(); ok {
				info["go"] = bi.GoVersion
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						info["commit"] = s.Value
					}
				}
			}
			if a.json {
				return a.printJSON(info)
			}
			fmt.Fprintf(a.env.Stdout, "belay %s (%s", info["version"], info["go"])
			if c := info["commit"]; c != "" {
				fmt.Fprintf(a.env.Stdout, ", commit %.12s", c)
			}
			fmt.Fprintln(a.env.Stdout, ")")
			return nil
		},
	}
}

// savesPerMinute is the server's limit of checkpoint saves per project:
// $RATE_LIMIT_CHECKPOINT_SAVE a minute (bursts of twice as many), else seed
// 003's default.
func (a *app) savesPerMinute() (int, error) {
	v := a.env.Getenv("RATE_LIMIT_CHECKPOINT_SAVE")
	if v == "" {
		return belay.DefaultSavesPerMinute, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, usagef("RATE_LIMIT_CHECKPOINT_SAVE must be a number of saves a minute (0 for no limit), got %q", v)
	}
	return n, nil
}

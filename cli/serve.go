package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// DefaultAddr is where `belay serve` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7420"

// Values of serve's --log-level and --log-format.
var (
	logLevels  = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	logFormats = []string{"text", "json"}
)

func (a *app) serveCommand() *cobra.Command {
	var addr, level, format string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API on the local database",
		Long: `Serve belay's HTTP API (/v1), /healthz, /metrics and the web dashboard (/)
on the embedded database (or --db). Stops gracefully on SIGINT or SIGTERM,
finishing requests in flight.

The log goes to standard error: each request (method, path, status, duration,
user) at info, health checks and metrics scrapes at debug.`,
		Example: `  belay serve --addr 0.0.0.0:7420 --workspace-root /srv/agents
  belay serve --log-format json --log-level warn`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			lvl, ok := logLevels[level]
			if !ok {
				return usagef("--log-level must be debug, info, warn or error, not %q", level)
			}
			opts := &slog.HandlerOptions{Level: lvl}
			var log *slog.Logger
			switch format {
			case "text":
				log = slog.New(slog.NewTextHandler(a.env.Stderr, opts))
			case "json":
				log = slog.New(slog.NewJSONHandler(a.env.Stderr, opts))
			default:
				return usagef("--log-format must be text or json, not %q", format)
			}
			return a.serve(cmd.Context(), addr, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", DefaultAddr, "address to listen on")
	f.StringArrayVar(&a.roots, "workspace-root", nil, "directory under which users other than admins may snapshot and restore workspaces (repeatable)")
	f.StringVar(&level, "log-level", "info", "least level logged: debug, info, warn or error")
	f.StringVar(&format, "log-format", "text", "log format: text or json")
	completeValues(cmd, "log-level", slices.Sorted(maps.Keys(logLevels)))
	completeValues(cmd, "log-format", logFormats)
	return cmd
}

func (a *app) serve(ctx context.Context, addr string, log *slog.Logger) error {
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
	return a.env.Backend.Serve(ctx, ServeConfig{Local: cfg, Addr: addr, Version: version(), Stdout: a.env.Stdout, Logger: log})
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

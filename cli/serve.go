package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/webhook"
)

// DefaultAddr is where `belay serve` listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7420"

func (a *app) serveCommand() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API on the local database",
		Long: `Serve belay's HTTP API (/v1), /healthz and /metrics on the embedded database.
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
	svc, err := a.openLocal(ctx)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(a.env.Stderr, nil))
	token, err := svc.Bootstrap(ctx)
	if err != nil {
		return err
	}
	if token != "" {
		fmt.Fprintf(a.env.Stdout, "Created user %q with this API token (shown once; use it as BELAY_TOKEN):\n  %s\n", core.BootstrapUser, token)
	}
	api := httpapi.New(httpapi.Options{Service: svc, Logger: log, Version: Version, Authenticate: svc.Authenticate})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	// Streams and long polls end when the server shuts down: Shutdown does
	// not cancel requests in flight by itself.
	baseCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		Handler:           api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	fmt.Fprintf(a.env.Stdout, "belay %s serving on http://%s (database %s)\n", Version, ln.Addr(), a.db.Path())
	// The sweeper and the webhook dispatcher stop before the database closes.
	bgCtx, stopBackground := context.WithCancel(context.Background())
	var background sync.WaitGroup
	defer func() {
		stopBackground()
		background.Wait()
	}()
	background.Go(func() { svc.RunSweeper(bgCtx) })
	background.Go(func() { webhook.Run(bgCtx, svc.WebhookSource(), webhook.Options{Logger: log}) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.RegisterOnShutdown(cancelRequests)
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print belay's version",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			info := map[string]string{"version": Version}
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

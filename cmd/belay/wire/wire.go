// Package wire builds belay from its parts: the SQLite store, the git
// workspaces, the core service and the HTTP server. It is the one place that
// chooses adapters; the CLI and the transports see belay.Service only.
package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// Backend returns the CLI's backend on the embedded SQLite database.
func Backend() cli.Backend {
	return cli.Backend{
		Open: func(ctx context.Context, cfg cli.LocalConfig) (*cli.Local, error) {
			l, err := open(ctx, cfg, nil)
			if err != nil {
				return nil, err
			}
			return &cli.Local{Service: l.svc, Path: l.db.Path(), Close: l.db.Close}, nil
		},
		Serve: serve,
	}
}

// local is an open database with the service on it.
type local struct {
	db  *sqlite.DB
	svc *core.Service
}

// open opens the database and the service on it, logging to log (the
// default logger when nil).
func open(ctx context.Context, cfg cli.LocalConfig, log *slog.Logger) (*local, error) {
	db, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "belay.db"))
	if err != nil {
		return nil, err
	}
	ws, err := workspace.New(workspace.Options{DataDir: cfg.DataDir})
	var we *workspace.Error
	if errors.As(err, &we) && we.Code == workspace.GitMissing {
		// Without git everything but workspace snapshots works; core says so
		// when one is asked for.
		ws, err = nil, nil
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	svc := core.New(core.Options{Store: db, Workspaces: ws, WorkspaceRoots: cfg.WorkspaceRoots, Logger: log})
	return &local{db: db, svc: svc}, nil
}

// serve runs `belay serve`: the API, the timeout sweeper and the webhook
// dispatcher on the local database, until ctx ends; then it finishes the
// requests in flight and stops the background work before the database closes.
func serve(ctx context.Context, cfg cli.ServeConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	l, err := open(ctx, cfg.Local, log)
	if err != nil {
		return err
	}
	defer l.db.Close()
	svc := l.svc
	token, err := svc.Bootstrap(ctx)
	if err != nil {
		return err
	}
	if token != "" {
		fmt.Fprintf(cfg.Stdout, "Created user %q with this API token (shown once; use it as BELAY_TOKEN):\n  %s\n", core.BootstrapUser, token)
	}
	api := httpapi.New(httpapi.Options{Service: svc, Logger: log, Version: cfg.Version, Authenticate: svc.Authenticate})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
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
	fmt.Fprintf(cfg.Stdout, "belay %s serving on http://%s (database %s)\n", cfg.Version, ln.Addr(), l.db.Path())
	// The sweeper and the webhook dispatcher stop before the database closes.
	bgCtx, stopBackground := context.WithCancel(context.Background())
	var background sync.WaitGroup
	defer func() {
		stopBackground()
		background.Wait()
	}()
	background.Go(func() { svc.RunSweeper(bgCtx) })
	background.Go(func() { svc.RunWebhooks(bgCtx) })
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

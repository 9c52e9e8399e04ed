// Package wire builds belay from its parts: the SQLite store, the git
// workspaces, the core service and the HTTP server. It is the one place that
// chooses adapters; the CLI and the transports see belay.Service only.
package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/dashboard"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/reqlog"
	"github.com/belayhq/belay/mcpserver"
	"github.com/belayhq/belay/search"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/migrate"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/trpc"
	"github.com/belayhq/belay/webhook"
	"github.com/belayhq/belay/workspace"
)

// Backend returns the CLI's backend on the embedded SQLite database.
func Backend() cli.Backend {
	return cli.Backend{
		Open: func(ctx context.Context, cfg cli.LocalConfig) (*cli.Local, error) {
			l, err := open(ctx, cfg, nil, false)
			if err != nil {
				return nil, err
			}
			return &cli.Local{Service: l.svc, Path: l.where, Close: l.close, IndexQueued: l.svc.IndexQueued}, nil
		},
		Serve:   serve,
		Migrate: migrateTo,
		WatchFS: watchFS,
		MCP: func(ctx context.Context, svc belay.Service, in io.ReadCloser, out io.WriteCloser) error {
			// A line that is not a JSON-RPC message is answered with a
			// JSON-RPC error instead of ending the server.
			in, out = mcpserver.Stdio(in, out)
			err := mcpserver.New(mcpserver.Options{Service: svc, Version: cli.Version}).Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
}

// watchFS runs `belay watch-fs`: a watcher per root, each lent to other
// processes' snapshots until ctx ends or one of them fails.
func watchFS(ctx context.Context, cfg cli.WatchFSConfig) error {
	ws, err := workspace.New(workspace.Options{DataDir: cfg.DataDir})
	if err != nil {
		return err
	}
	defer ws.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(cfg.Roots))
	for _, root := range cfg.Roots {
		go func() {
			errs <- core.WorkspaceError(ws.ServeWatch(ctx, root, func() { cfg.Ready(root) }))
		}()
	}
	var first error
	for range cfg.Roots {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// local is an open database with the service on it.
type local struct {
	db  store.Store
	svc *core.Service
	ws  *workspace.Manager // nil without git
	// where names the database for people, without a password.
	where string
}

// close stops the service's event tailer and the workspace watchers, then
// closes the database it reads.
func (l *local) close() error {
	l.svc.Close()
	if l.ws != nil {
		l.ws.Close()
	}
	return l.db.Close()
}

// openStore opens the database: PostgreSQL for a postgres:// URL, else the
// data directory's embedded SQLite file.
func openStore(ctx context.Context, cfg cli.LocalConfig) (store.Store, string, error) {
	if u := cfg.DatabaseURL; u != "" {
		parsed, err := url.Parse(u)
		if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
			return nil, "", belay.Invalid("db", "the database must be a postgres:// URL, got %q", belay.Clip(u, 40))
		}
		db, err := postgres.Open(ctx, u)
		if err != nil {
			return nil, "", err
		}
		return db, parsed.Redacted(), nil
	}
	durability := sqlite.Full
	if cfg.Relaxed {
		durability = sqlite.Relaxed
	}
	db, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "belay.db"), sqlite.WithDurability(durability))
	if err != nil {
		return nil, "", err
	}
	return db, db.Path(), nil
}

// open opens the database and the service on it, logging to log (the
// default logger when nil). With watch, the workspace manager keeps a
// file-system watcher on each workspace it snapshots (for a long-running
// process: a short-lived command would pay for the watches and never use
// them).
func open(ctx context.Context, cfg cli.LocalConfig, log *slog.Logger, watch bool) (*local, error) {
	db, where, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ws, err := workspace.New(workspace.Options{DataDir: cfg.DataDir, WatchFiles: watch})
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
	embedder, err := newEmbedder(cfg.Embedding)
	if err != nil {
		db.Close()
		return nil, err
	}
	svc := core.New(core.Options{Store: db, Workspaces: ws, WorkspaceRoots: cfg.WorkspaceRoots, SavesPerMinute: cfg.SavesPerMinute,
		Embedder: embedder, Logger: log})
	return &local{db: db, svc: svc, ws: ws, where: where}, nil
}

// serve runs `belay serve`: the API, the timeout sweeper, the webhook
// dispatcher and the search indexer on the local database, until ctx ends;
// then it finishes the requests in flight and stops the background work
// before the database closes.
func serve(ctx context.Context, cfg cli.ServeConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	l, err := open(ctx, cfg.Local, log, true)
	if err != nil {
		return err
	}
	defer l.close()
	svc := l.svc
	token, err := svc.Bootstrap(ctx)
	if err != nil {
		return err
	}
	if token != "" {
		fmt.Fprintf(cfg.Stdout, "Created user %q with this API token (shown once; use it as BELAY_TOKEN):\n  %s\n", core.BootstrapUser, token)
	}
	api := httpapi.New(httpapi.Options{Service: svc, Logger: log, Version: cfg.Version, Authenticate: svc.Authenticate})
	api.Handle("/mcp", mcpserver.HTTPHandler(mcpserver.New(mcpserver.Options{Service: svc, Version: cfg.Version})))
	// tRPC authenticates itself: WebSocket clients send their token in
	// connectionParams, not in a header.
	authenticate := func(ctx context.Context, token string) (belay.Actor, error) {
		a, err := svc.Authenticate(ctx, token)
		if err == nil {
			reqlog.NoteUser(ctx, a.UserID)
		}
		return a, err
	}
	for root, sj := range map[string]bool{"/trpc": false, "/trpc-superjson": true} {
		h := trpc.New(root+"/", trpc.Options{Service: svc, Authenticate: authenticate, SuperJSON: sj, Logger: log})
		api.HandlePublic(root, h) // WebSocket clients connect to the root
		api.HandlePublic(root+"/", h)
	}
	// The dashboard signs people in itself (an API token exchanged for a
	// sealed cookie that every instance on the database opens alike) and
	// calls the service as them.
	key, err := svc.Key(ctx, "dashboard")
	if err != nil {
		return err
	}
	dash, err := dashboard.New(dashboard.Options{Service: svc, Authenticate: svc.Authenticate, Logger: log, Key: key, SignOuts: svc})
	if err != nil {
		return err
	}
	for _, p := range dashboard.Patterns() {
		api.HandlePublic(p, dash)
	}
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
	fmt.Fprintf(cfg.Stdout, "belay %s serving on http://%s (database %s)\n", cfg.Version, ln.Addr(), l.where)
	fmt.Fprintf(cfg.Stdout, "Dashboard: %s (sign in with an API token)\n", dashboardURL(ln.Addr()))
	// The sweeper and the webhook dispatcher stop before the database closes.
	bgCtx, stopBackground := context.WithCancel(context.Background())
	var background sync.WaitGroup
	defer func() {
		stopBackground()
		background.Wait()
	}()
	background.Go(func() { svc.RunSweeper(bgCtx) })
	background.Go(func() { webhook.Run(bgCtx, svc.WebhookSource(), webhook.Options{Logger: log}) })
	background.Go(func() { svc.RunIndexer(bgCtx) })
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

// newEmbedder is the search's embedder: an OpenAI-compatible endpoint when
// one is configured, else the built-in offline one.
func newEmbedder(cfg cli.EmbeddingConfig) (search.Embedder, error) {
	if cfg.URL == "" {
		if cfg.Model != "" {
			return nil, belay.Invalid("BELAY_EMBEDDING_URL", "BELAY_EMBEDDING_MODEL is set but BELAY_EMBEDDING_URL is not: name the endpoint")
		}
		return search.NewHash(0), nil
	}
	e, err := search.NewOpenAI(search.OpenAIOptions{URL: cfg.URL, Model: cfg.Model, APIKey: cfg.APIKey})
	if err != nil {
		return nil, belay.Invalid("BELAY_EMBEDDING_URL", "%v", err)
	}
	return e, nil
}

// dashboardURL is the address a browser on this machine opens: a wildcard
// listen address becomes localhost.
func dashboardURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// migrateTo runs `belay migrate`: the data directory's SQLite database into
// an empty PostgreSQL one, reporting rows copied per table through ctx.
func migrateTo(ctx context.Context, cfg cli.MigrateConfig) (*cli.MigrateReport, error) {
	src := filepath.Join(cfg.DataDir, "belay.db")
	res, err := migrate.SQLiteToPostgres(ctx, src, cfg.To, func(table string, done, total int64) {
		belay.ReportProgress(ctx, belay.Progress{Phase: "copying " + table, Done: done, Total: total})
	})
	if err != nil {
		return nil, err
	}
	dest := "the destination"
	if u, err := url.Parse(cfg.To); err == nil {
		dest = u.Redacted()
	}
	rep := &cli.MigrateReport{Source: src, Destination: dest, LastEventSeq: res.LastEventSeq, NextEventSeq: res.NextEventSeq, OK: res.OK}
	for _, c := range res.Tables {
		rep.Tables = append(rep.Tables, cli.MigrateCount(c))
	}
	return rep, nil
}

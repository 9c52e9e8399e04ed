// Package cli is belay's command line. Without BELAY_URL it opens the local
// SQLite database directly, like git; with BELAY_URL it talks to a server
// through the Go client, which implements the same service interface.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store/sqlite"
	"github.com/belayhq/belay/workspace"
)

// Exit codes of the belay command.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Version is set at build time with -ldflags "-X github.com/belayhq/belay/cli.Version=…".
var Version = "dev"

// Env is what a command reads from its surroundings; tests pass their own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Getwd returns the working directory, the default project path.
	Getwd func() (string, error)
}

// OSEnv is the real process environment.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Getwd: os.Getwd}
}

// usageError marks a mistake in how the command was called (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// app holds the state shared by the commands of one invocation.
type app struct {
	env     Env
	dataDir string
	json    bool

	svc   belay.Service
	local *core.Service
	// roots are the directories where users other than admins may snapshot (serve).
	roots []string
	// prompts is standard input as read by interactive prompts without a terminal.
	prompts io.Reader
	db      *sqlite.DB
	// durability is what a commit of the local database waits for (--durability).
	durability sqlite.Durability
}

// Run executes belay with args (without the program name) and returns the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	a := &app{env: env}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err := root.ExecuteContext(ctx)
	a.close()
	if err == nil {
		return ExitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	var ue usageError
	// cobra reports an unknown command as a plain error; it is a usage error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
		fmt.Fprintf(env.Stderr, "belay: %v\nRun 'belay --help' for usage.\n", err)
		return ExitUsage
	}
	a.printError(err)
	return ExitError
}

// Main runs belay as a process: signals cancel the context.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], OSEnv())
	stop()
	os.Exit(code)
}

func (a *app) printError(err error) {
	var be *belay.Error
	if !errors.As(err, &be) {
		be = &belay.Error{Code: belay.CodeInternal, Message: err.Error()}
		if u := a.env.Getenv("BELAY_URL"); u != "" && client.IsConnectionError(err) {
			be.Message = fmt.Sprintf("cannot reach the belay server at %s (BELAY_URL): %v", u, err)
		}
	}
	if a.json {
		b, _ := json.Marshal(map[string]any{"error": be})
		fmt.Fprintln(a.env.Stderr, string(b))
		return
	}
	msg := be.Message
	if msg == "" {
		msg = string(be.Code)
	}
	fmt.Fprintf(a.env.Stderr, "belay: %s (%s)\n", msg, be.Code)
}

const rootLong = `belay keeps checkpoints of an AI agent's work, pauses for human decisions,
and rolls back to any checkpoint.

Without BELAY_URL the commands open the local database in the data directory
($BELAY_DATA_DIR, else $XDG_DATA_HOME/belay, else ~/.local/share/belay).
With BELAY_URL (and BELAY_TOKEN) they talk to a belay server.

Exit codes: 0 success, 1 error, 2 wrong usage ('belay wait --help' lists its own).`

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "belay",
		Short:         "Checkpoints, rollback and human-in-the-loop for AI agents",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&a.dataDir, "data-dir", "", "data directory (default $BELAY_DATA_DIR, $XDG_DATA_HOME/belay or ~/.local/share/belay)")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print JSON instead of text")
	root.PersistentFlags().Var(&a.durability, "durability", "full: a saved write survives a power loss; relaxed: faster, the last writes before a power loss or OS crash may be lost")
	root.AddCommand(
		a.serveCommand(),
		a.saveCommand(),
		a.checkpointsCommand(),
		a.showCommand(),
		a.deleteCommand(),
		a.withSessionDelete(a.sessionsCommand()),
		a.sessionInfoCommand(),
		a.pendingCommand(),
		a.decideCommand(),
		a.waitCommand(),
		a.watchCommand(),
		a.tokenCommand(),
		a.webhookCommand(),
		a.rollbackCommand(),
		a.rollbacksCommand(),
		a.diffCommand(),
		a.validateCommand(),
		a.exportCommand(),
		a.importCommand(),
		a.duCommand(),
		a.versionCommand(),
	)
	return root
}

// args wraps a cobra argument rule so its failure is a usage error.
func args(rule cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := rule(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// resolveDataDir applies --data-dir, then $BELAY_DATA_DIR, $XDG_DATA_HOME, ~/.local/share.
func (a *app) resolveDataDir() (string, error) {
	if a.dataDir != "" {
		return filepath.Abs(a.dataDir)
	}
	if d := a.env.Getenv("BELAY_DATA_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := a.env.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "belay"), nil
	}
	home := a.env.Getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot find a data directory: set BELAY_DATA_DIR or --data-dir")
		}
		home = h
	}
	return filepath.Join(home, ".local", "share", "belay"), nil
}

// openLocal opens the local database and core service.
func (a *app) openLocal(ctx context.Context) (*core.Service, error) {
	if a.local != nil {
		return a.local, nil
	}
	dir, err := a.resolveDataDir()
	if err != nil {
		return nil, err
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.WithDurability(a.durability))
	if err != nil {
		return nil, err
	}
	a.db = db
	ws, err := workspace.New(workspace.Options{DataDir: dir})
	var we *workspace.Error
	if errors.As(err, &we) && we.Code == workspace.GitMissing {
		// Without git everything but workspace snapshots works; core says so
		// when one is asked for.
		ws, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	a.local = core.New(core.Options{Store: db, Workspaces: ws, WorkspaceRoots: a.roots})
	return a.local, nil
}

// service returns the client when BELAY_URL is set, else the local service.
func (a *app) service(ctx context.Context) (belay.Service, error) {
	if a.svc != nil {
		return a.svc, nil
	}
	if u := a.env.Getenv("BELAY_URL"); u != "" {
		c, err := client.New(u, a.env.Getenv("BELAY_TOKEN"))
		if err != nil {
			return nil, err
		}
		a.svc = c
		return c, nil
	}
	svc, err := a.openLocal(ctx)
	if err != nil {
		return nil, err
	}
	a.svc = svc
	return svc, nil
}

// localActor is who the CLI acts as on the local database: the OS user, who
// owns the database file and so is its administrator.
func localActor() belay.Actor {
	name := "local"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return belay.Actor{UserID: name, Admin: true}
}

// open returns the command's context (with the local identity when there is
// no server) and the service to call.
func (a *app) open(cmd *cobra.Command) (context.Context, belay.Service, error) {
	ctx := a.ctx(cmd)
	svc, err := a.service(ctx)
	return ctx, svc, err
}

// openCheckpoint is open plus the checkpoint named by ref (N or ID).
func (a *app) openCheckpoint(cmd *cobra.Command, ref, sessionID string) (context.Context, belay.Service, *belay.Checkpoint, error) {
	ctx, svc, err := a.open(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	cp, err := a.resolveCheckpoint(ctx, svc, ref, sessionID)
	return ctx, svc, cp, err
}

func (a *app) ctx(cmd *cobra.Command) context.Context {
	ctx := cmd.Context()
	if a.env.Getenv("BELAY_URL") == "" {
		ctx = belay.WithActor(ctx, localActor())
	}
	return ctx
}

func (a *app) close() {
	if a.db != nil {
		a.db.Close()
	}
}

func (a *app) cwd() (string, error) {
	wd, err := a.env.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return wd, nil
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

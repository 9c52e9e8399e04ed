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
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
)

// Exit codes of the belay command.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
	// ExitInterrupted ends a command stopped by Ctrl-C (SIGINT) or SIGTERM,
	// as shells report a process killed by SIGINT.
	ExitInterrupted = 130
)

// Version is set at build time with -ldflags "-X github.com/belayhq/belay/cli.Version=…".
// Without it, the module version go install records is used (see version).
var Version = "dev"

// version is Version, or when that was not set at build time the version of
// belay's module as the go command recorded it (`go install …@v1.2.0`, or a
// pseudo-version from the repository's commit), else "dev".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Version
	}
	return versionOf(Version, bi)
}

func versionOf(set string, bi *debug.BuildInfo) string {
	if set != "dev" {
		return set
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return set
}

// Env is what a command reads from its surroundings; tests pass their own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Getwd returns the working directory, the default project path.
	Getwd func() (string, error)
	// Backend opens the local database and serves it.
	Backend Backend
}

// Backend is what the commands run on when no server is named: the program
// that builds the CLI (cmd/belay) wires the store, the workspaces and the
// service, so this package depends on belay.Service alone.
type Backend struct {
	// Open opens the local database as a service.
	Open func(ctx context.Context, cfg LocalConfig) (*Local, error)
	// Serve serves the API on the local database until ctx ends.
	Serve func(ctx context.Context, cfg ServeConfig) error
	// MCP serves the MCP tools on svc over in and out (stdio) until in ends
	// or ctx does.
	MCP func(ctx context.Context, svc belay.Service, in io.ReadCloser, out io.WriteCloser) error
	// Migrate copies the data directory's database into an empty
	// PostgreSQL one (`belay migrate`), reporting progress through ctx.
	Migrate func(ctx context.Context, cfg MigrateConfig) (*MigrateReport, error)
	// WatchFS keeps a file-system watcher on each workspace and lends it to
	// the saves of other processes (`belay watch-fs`) until ctx ends.
	WatchFS func(ctx context.Context, cfg WatchFSConfig) error
}

// LocalConfig says which local database to open and how.
type LocalConfig struct {
	DataDir string
	// DatabaseURL, when set (postgres://…), is the database instead of the
	// data directory's embedded SQLite file.
	DatabaseURL string
	// WorkspaceRoots are the directories under which users other than admins
	// may snapshot, restore and diff workspaces (serve).
	WorkspaceRoots []string
	// SavesPerMinute limits checkpoint saves per project; 0: no limit.
	SavesPerMinute int
	// Embedding is the search's embedding endpoint, when one is set.
	Embedding EmbeddingConfig
	// Relaxed (--durability relaxed) lets the embedded database acknowledge
	// a commit before it is on disk.
	Relaxed bool
}

// Local is an open local database.
type Local struct {
	Service belay.Service
	// Path is the database file, for messages.
	Path  string
	Close func() error
	// IndexQueued embeds the checkpoints waiting for their search vectors,
	// reporting progress; nil when the backend has nothing to embed with.
	IndexQueued func(ctx context.Context, progress func(done, queued int64)) error
}

// ServeConfig configures `belay serve`.
type ServeConfig struct {
	Local   LocalConfig
	Addr    string
	Version string
	// Stdout gets what a person reads (the URL, the first token).
	Stdout io.Writer
	// Logger gets the log: each request at info.
	Logger *slog.Logger
}

// OSEnv is the real process environment running on backend.
func OSEnv(backend Backend) Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Getwd: os.Getwd, Backend: backend}
}

// errInterrupted ends a command that a person stopped other than by a
// signal: Ctrl-C in a full-screen prompt, which reads it as a key.
var errInterrupted = errors.New("interrupted")

// usageError marks a mistake in how the command was called (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// countFlag refuses a count flag (a page size, a number of results) outside
// 1-max as a usage error: 0 would otherwise quietly mean the service's
// default, and past max the service refuses it as any other bad input.
func countFlag(name string, v, max int) error {
	if v < 1 || v > max {
		return usagef("--%s must be 1-%d, got %d", name, max, v)
	}
	return nil
}

// keepFlag refuses a negative number of things to keep as a usage error.
func keepFlag(name string, v int) error {
	if v < 0 {
		return usagef("--%s must be 0 or more, got %d", name, v)
	}
	return nil
}

// app holds the state shared by the commands of one invocation.
type app struct {
	env      Env
	dataDir  string
	database string
	json     bool

	// noPager is --no-pager.
	noPager bool
	// projectFlag is --project; projectRoot the project found, once.
	projectFlag, projectRoot string

	svc   belay.Service
	local *Local
	// roots are the directories where users other than admins may snapshot (serve).
	roots []string
	// durability is --durability: full or relaxed.
	durability string
}

// Run executes belay with args (without the program name) and returns the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	a := &app{env: env}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	// cobra adds its completion command when the command runs; added now,
	// after SetOut, as its scripts are written where it finds stdout then.
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	cmd, err := root.ExecuteContextC(ctx)
	a.close()
	if err == nil {
		return ExitOK
	}
	var code exitCode
	isCode := errors.As(err, &code)
	if ctx.Err() != nil || errors.Is(err, errInterrupted) {
		// A command that chose its exit code said why it stopped (belay
		// run: how to resume); --json keeps stderr to JSON, the exit code
		// says it.
		if !isCode && !a.json {
			fmt.Fprintln(env.Stderr, "belay: interrupted")
		}
		return ExitInterrupted
	}
	if isCode {
		return int(code)
	}
	var ue usageError
	// cobra reports an unknown command as a plain error; it is a usage error.
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
		// cobra parses no flag of a command it cannot find.
		a.json = a.json || slices.Contains(args, "--json")
		if a.json {
			a.printError(&belay.Error{Code: belay.CodeValidation, Message: err.Error()})
			return ExitUsage
		}
		// cmd is the command misused, or the nearest that cobra found.
		fmt.Fprintf(env.Stderr, "belay: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return ExitUsage
	}
	a.printError(err)
	return ExitError
}

// Main runs belay as a process on backend: signals cancel the context.
func Main(backend Backend) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], OSEnv(backend))
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
	fmt.Fprintf(a.env.Stderr, "belay: %s (%s)\n", belay.Printable(msg), be.Code)
	if h := a.hint(be); h != "" {
		fmt.Fprintf(a.env.Stderr, "hint: %s\n", h)
	}
}

// hint is what a person at a terminal can do about an error: core says what
// happened, the CLI adds its own commands.
func (a *app) hint(be *belay.Error) string {
	switch {
	case be.Code == belay.CodeUnauthenticated && a.env.Getenv("BELAY_URL") != "":
		if a.env.Getenv("BELAY_TOKEN") == "" {
			return "set BELAY_TOKEN to an API token of the server at BELAY_URL (`belay token create --user NAME` makes one)"
		}
		return "BELAY_TOKEN is not a valid token of the server at BELAY_URL (`belay token create --user NAME` makes one)"
	case be.Code == belay.CodeCheckpointCorrupt:
		return "run `belay validate` to see how to recover"
	case be.Code == belay.CodeUnauthorized && be.Details["cause"] == "TOKEN_LIMIT":
		return "the token is limited to other projects: an admin makes one for this project with `belay token create --user NAME --project DIR`"
	case be.Code == belay.CodeUnauthorized && be.Details["projectPath"] != nil:
		return "users other than admins work only under a directory given to `belay serve --workspace-root DIR`"
	case be.Code == belay.CodeLeaseLost:
		return "another process holds the session; `belay resume` takes it over once it is interrupted"
	case be.Code == belay.CodeBudgetExceeded:
		return "`belay pending` shows the decision the budget waits for"
	}
	return ""
}

const rootLong = `belay keeps checkpoints of an AI agent's work, pauses for human decisions,
and rolls back to any checkpoint.

Without BELAY_URL the commands open the local database in the data directory
($BELAY_DATA_DIR, else $XDG_DATA_HOME/belay, else ~/.local/share/belay).
With BELAY_URL (and BELAY_TOKEN) they talk to a belay server.

Where a command takes the id of a checkpoint, session, token or webhook, a
unique prefix of it (at least 4 characters) will do; lists show each id as its
shortest prefix unique among those listed.

The project is the working directory's workspace, found as git finds a
repository: the nearest directory from the working directory up that holds a
.git or that a belay session already works on (else the working directory
itself); --project names it instead.

On a terminal, diffs and long lists go through $PAGER (else less; --no-pager
or PAGER=cat turn it off) and diffs are coloured (NO_COLOR turns it off).

Questions (decide, sessions delete, plan edit) are asked only on a terminal,
as plain lines with BELAY_ACCESSIBLE=1 (for screen readers); without one the
command refuses and names the flag that answers instead (--option, --yes).

Exit codes: 0 success, 1 error, 2 wrong usage, 130 interrupted (Ctrl-C, with
"belay: interrupted" on stderr unless --json); 'belay wait --help' lists its own.`

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "belay",
		Short:         "Checkpoints, rollback and human-in-the-loop for AI agents",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&a.dataDir, "data-dir", "", "data directory (default $BELAY_DATA_DIR, $XDG_DATA_HOME/belay or ~/.local/share/belay)")
	root.PersistentFlags().StringVar(&a.database, "db", "", "a PostgreSQL database (postgres://…) instead of the embedded one (default $BELAY_DATABASE_URL); its query may set pool_max_conns (default 32), pool_max_idle_conns, pool_max_conn_lifetime and server settings such as statement_timeout=5s")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print JSON instead of text")
	root.PersistentFlags().BoolVar(&a.noPager, "no-pager", false, "print diffs and long lists directly, not through $PAGER (or less)")
	root.PersistentFlags().StringVar(&a.projectFlag, "project", "", "the project's directory (default: found from the working directory, as git does)")
	root.PersistentFlags().StringVar(&a.durability, "durability", "full", "full: a saved write survives a power loss; relaxed: faster, the last writes before a power loss or OS crash may be lost (the embedded database; PostgreSQL keeps its own settings)")
	root.AddCommand(
		a.serveCommand(),
		a.openCommand(),
		a.saveCommand(),
		a.sessionCommand(),
		a.resumeCommand(),
		a.runCommand(),
		a.cleanupCommand(),
		a.mcpCommand(),
		a.retentionCommand(),
		a.planCommand(),
		a.taskCommand(),
		a.costCommand(),
		a.statusCommand(),
		a.contextCommand(),
		a.checkpointsCommand(),
		a.showCommand(),
		a.deleteCommand(),
		a.withSessionDelete(a.sessionsCommand()),
		a.sessionInfoCommand(),
		a.askCommand(),
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
		a.searchCommand(),
		a.reindexCommand(),
		a.demoCommand(),
		a.gcCommand(),
		a.migrateCommand(),
		a.watchFSCommand(),
		a.versionCommand(),
	)
	a.completions(root)
	return root
}

// refuseUnknownSubcommands makes each command below root that only groups
// others (webhook, completion…) refuse an argument that names none of them as
// a usage error listing them: cobra runs no argument check on such a command
// and prints its help, exiting 0. Alone, the group still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasParent() || !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = func(cmd *cobra.Command, argv []string) error {
		if len(argv) == 0 {
			return nil
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		return usagef("unknown command %q for %q: it takes one of %s", argv[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
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

// localConfig is the configuration of the local database.
func (a *app) localConfig() (LocalConfig, error) {
	dir, err := a.resolveDataDir()
	if err != nil {
		return LocalConfig{}, err
	}
	db := a.database
	if db == "" {
		db = a.env.Getenv("BELAY_DATABASE_URL")
	}
	var relaxed bool
	switch a.durability {
	case "", "full":
	case "relaxed":
		relaxed = true
	default:
		return LocalConfig{}, usagef("--durability must be full or relaxed, got %q", a.durability)
	}
	return LocalConfig{DataDir: dir, DatabaseURL: db, WorkspaceRoots: a.roots, Embedding: a.embeddingConfig(), Relaxed: relaxed}, nil
}

// openLocal opens the local database once per invocation.
func (a *app) openLocal(ctx context.Context) (belay.Service, error) {
	if a.local != nil {
		return a.local.Service, nil
	}
	if a.env.Backend.Open == nil {
		return nil, errors.New("this build of belay has no local database: set BELAY_URL to use a server")
	}
	cfg, err := a.localConfig()
	if err != nil {
		return nil, err
	}
	if a.local, err = a.env.Backend.Open(ctx, cfg); err != nil {
		return nil, err
	}
	return a.local.Service, nil
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

// openCheckpoint is open plus the checkpoint named by argv[0] (a number,
// an id, a unique id prefix or a name) or, with step > 0, the newest
// checkpoint of that step.
func (a *app) openCheckpoint(cmd *cobra.Command, argv []string, step int, sessionID string) (context.Context, belay.Service, *belay.Checkpoint, error) {
	if (len(argv) == 1) == (step > 0) {
		return nil, nil, nil, usagef("name one checkpoint: N, ID, NAME or --step N")
	}
	ctx, svc, err := a.open(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	in := belay.CheckpointRef{Step: step}
	if len(argv) == 1 {
		in.Ref = argv[0]
	}
	if sessionID != "" {
		sess, err := svc.ResolveSession(ctx, sessionID)
		if err != nil {
			return nil, nil, nil, err
		}
		in.SessionID = sess.ID
	} else if in.ProjectPath, err = a.project(ctx, svc); err != nil {
		return nil, nil, nil, err
	}
	cp, err := svc.ResolveCheckpoint(ctx, in)
	return ctx, svc, cp, withHint(err, "pass --session ID (see `belay sessions`)")
}

// oneCheckpoint takes N|ID|NAME, or no argument with --step.
func oneCheckpoint(step *int) cobra.PositionalArgs {
	return args(func(cmd *cobra.Command, a []string) error {
		if *step > 0 {
			return cobra.NoArgs(cmd, a)
		}
		return cobra.ExactArgs(1)(cmd, a)
	})
}

// stepFlag adds --step to a command that names one checkpoint.
func stepFlag(cmd *cobra.Command, v *int) {
	cmd.Flags().IntVar(v, "step", 0, "the newest checkpoint of this step, instead of N|ID|NAME")
}

func (a *app) ctx(cmd *cobra.Command) context.Context {
	ctx := cmd.Context()
	if a.env.Getenv("BELAY_URL") == "" {
		ctx = belay.WithActor(ctx, localActor())
	}
	return ctx
}

func (a *app) close() {
	if a.local != nil {
		a.local.Close()
	}
}

// project returns the project the command works on: --project, else the
// nearest directory from the working directory up that holds a .git or is
// already a session's project path, else the working directory.
func (a *app) project(ctx context.Context, svc belay.Service) (string, error) {
	if a.projectRoot != "" {
		return a.projectRoot, nil
	}
	if a.projectFlag != "" {
		p, err := a.absPath(a.projectFlag)
		if err != nil {
			return "", err
		}
		a.projectRoot = p
		return p, nil
	}
	wd, err := a.cwd()
	if err != nil {
		return "", err
	}
	a.projectRoot = wd
	for dir := wd; ; {
		// Only a session a save by this path would continue marks a project:
		// another user's (who is no admin) above would widen it to theirs.
		known, err := svc.ListSessions(ctx, belay.ListSessionsInput{ProjectPath: dir, Own: true, Limit: 1})
		if err != nil {
			return "", err
		}
		if _, gitErr := os.Lstat(filepath.Join(dir, ".git")); len(known.Items) > 0 || gitErr == nil {
			a.projectRoot = dir
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return a.projectRoot, nil
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

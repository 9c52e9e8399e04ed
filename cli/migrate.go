package cli

import (
	"fmt"
	"net/url"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// MigrateConfig says what `belay migrate` copies where.
type MigrateConfig struct {
	// DataDir holds the SQLite database copied.
	DataDir string
	// To is the PostgreSQL database (postgres://…) copied into.
	To string
}

// MigrateReport is what `belay migrate` did.
type MigrateReport struct {
	// Source is the SQLite file; Destination the database, without a password.
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Tables are the rows of every table in the source and, after the copy,
	// in the destination.
	Tables []MigrateCount `json:"tables"`
	// LastEventSeq is the last event copied; NextEventSeq the number the
	// destination hands out next.
	LastEventSeq int64 `json:"last_event_seq"`
	NextEventSeq int64 `json:"next_event_seq"`
	// OK says the counts match and the event log continues.
	OK bool `json:"ok"`
	// Snapshots is the directory of the workspace snapshots, which stay on
	// this machine's disk: the database refers to them, it does not hold them.
	Snapshots string `json:"snapshots"`
}

// MigrateCount is one table's rows on both sides.
type MigrateCount struct {
	Table       string `json:"table"`
	Source      int64  `json:"source"`
	Destination int64  `json:"destination"`
}

func (a *app) migrateCommand() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "migrate --to postgres://…",
		Short: "Copy the local database into an empty PostgreSQL database",
		Long: `Copy the data directory's embedded database into PostgreSQL, for several
'belay serve' instances to share: sessions, checkpoints (byte for byte, so
their checksums verify), decisions, rollbacks, grants, events (with their
sequence numbers), users, API tokens, webhooks and their positions, retention
policies and the search index. The destination must hold no belay data; the
copy is one transaction, so a failure leaves it empty.

At the end the rows of every table are counted on both sides; a mismatch
exits 1. Workspace snapshots are not in the database: they stay in the data
directory, on this machine, and the instance running here with the same
--data-dir serves them. Stop 'belay serve' on the data directory first.`,
		Example: `  belay migrate --to postgres://belay@db.internal:5432/belay
  belay --json migrate --to "$BELAY_DATABASE_URL"`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usagef("name the destination: --to postgres://…")
			}
			if u, err := url.Parse(to); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
				return belay.Invalid("to", "the destination must be a postgres:// URL, got %q", belay.Clip(to, 40))
			}
			if a.env.Backend.Migrate == nil {
				return fmt.Errorf("this build of belay cannot migrate")
			}
			dir, err := a.resolveDataDir()
			if err != nil {
				return err
			}
			pctx, done := a.withProgress(a.ctx(cmd), "copying")
			rep, err := a.env.Backend.Migrate(pctx, MigrateConfig{DataDir: dir, To: to})
			done()
			if err != nil {
				return err
			}
			rep.Snapshots = filepath.Join(dir, "workspaces")
			if a.json {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				a.printMigrate(rep)
			}
			if !rep.OK {
				return exitCode(ExitError)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the PostgreSQL database to copy into (postgres://…)")
	return cmd
}

func (a *app) printMigrate(rep *MigrateReport) {
	w := a.env.Stdout
	fmt.Fprintf(w, "Copied %s into %s.\n\n", rep.Source, rep.Destination)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TABLE\tSOURCE\tDESTINATION\t")
	for _, c := range rep.Tables {
		mark := ""
		if c.Source != c.Destination {
			mark = "MISMATCH"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", c.Table, c.Source, c.Destination, mark)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nEvents continue at %d (the last copied was %d).\n", rep.NextEventSeq, rep.LastEventSeq)
	if rep.OK {
		fmt.Fprintln(w, "Verified: every table has as many rows in both databases.")
	} else {
		fmt.Fprintln(w, "NOT VERIFIED: the counts above differ; do not switch to the destination.")
	}
	fmt.Fprintf(w, "Workspace snapshots stay on this machine in %s: run the instance that snapshots and restores\n"+
		"these workspaces here, with this --data-dir and --db %s.\n", rep.Snapshots, rep.Destination)
}

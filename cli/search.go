package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/belayhq/belay"
)

// EmbeddingConfig names an OpenAI-compatible embedding endpoint
// ($BELAY_EMBEDDING_URL, $BELAY_EMBEDDING_MODEL, $BELAY_EMBEDDING_API_KEY);
// without a URL, search uses the built-in offline embedder.
type EmbeddingConfig struct {
	URL, Model, APIKey string
}

func (a *app) embeddingConfig() EmbeddingConfig {
	return EmbeddingConfig{URL: a.env.Getenv("BELAY_EMBEDDING_URL"), Model: a.env.Getenv("BELAY_EMBEDDING_MODEL"),
		APIKey: a.env.Getenv("BELAY_EMBEDDING_API_KEY")}
}

// indexLocal embeds what waits on the local database, when the CLI works on
// one: no indexer runs there unless `belay serve` does.
func (a *app) indexLocal(ctx context.Context, progress func(done, queued int64)) error {
	if a.local == nil || a.local.IndexQueued == nil {
		return nil
	}
	return a.local.IndexQueued(ctx, progress)
}

const searchLong = `Search checkpoints by what they say: a full-text ranking (BM25 over name,
summary, description and tags) and a vector ranking, fused by reciprocal rank
into a score from 0 to 1. Every checkpoint you may read is searched unless
--project or --tag narrow it.

The built-in embedder is offline and lexical, not semantic: it matches shared
words and parts of words (migrate, migration), never synonyms. Set
BELAY_EMBEDDING_URL (an OpenAI-compatible /v1/embeddings endpoint),
BELAY_EMBEDDING_MODEL and BELAY_EMBEDDING_API_KEY for meaning; then run
'belay reindex'.`

func (a *app) searchCommand() *cobra.Command {
	var in belay.SearchInput
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search checkpoints by their words and meaning",
		Long:  searchLong,
		Example: `  belay search "jwt authentication"
  belay search OC-41252 --project . --top-k 10
  belay search "database choice" --tag architecture --explain`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := countFlag("top-k", in.TopK, belay.MaxTopK); err != nil {
				return err
			}
			in.Query = strings.Join(argv, " ")
			if err := a.projectPaths(&in.ProjectPath); err != nil {
				return err
			}
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			// Saves since the last search are embedded first, so the local
			// database finds them by meaning too; a failure costs only that.
			if err := a.indexLocal(ctx, nil); err != nil {
				fmt.Fprintf(a.env.Stderr, "belay: checkpoints not embedded yet are found by text alone: %v\n", err)
			}
			res, err := svc.SearchCheckpoints(ctx, in)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			a.printSearch(res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.ProjectPath, "project", "", "only checkpoints of this project path")
	f.StringArrayVar(&in.Tags, "tag", nil, "only checkpoints with this tag (repeatable: all must match)")
	f.IntVar(&in.TopK, "top-k", belay.DefaultTopK, fmt.Sprintf("how many results, 1-%d", belay.MaxTopK))
	f.BoolVar(&in.Explain, "explain", false, "show how each result was ranked")
	return cmd
}

func (a *app) printSearch(res *belay.SearchResult) {
	out := a.env.Stdout
	for _, w := range res.Warnings {
		fmt.Fprintf(a.env.Stderr, "belay: %s\n", w)
	}
	if len(res.Results) == 0 {
		fmt.Fprintln(out, "No checkpoint matches.")
	}
	ids, sessions := newAbbrev(), newAbbrev()
	for _, h := range res.Results {
		ids.add(h.Checkpoint.ID)
		sessions.add(h.Checkpoint.SessionID)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(res.Results) > 0 && res.Explain == nil {
		fmt.Fprintln(tw, "SCORE\tSEQ\tID\tSESSION\tSUMMARY\tTAGS\tCREATED")
	}
	for _, h := range res.Results {
		c := h.Checkpoint
		fmt.Fprintf(tw, "%.2f\t%d\t%s\t%s\t%s\t%s\t%s\n", h.Score, c.Seq, ids.of(c.ID), sessions.of(c.SessionID),
			belay.OneLine(c.Summary, 60), dash(strings.Join(c.Tags, ",")), ago(c.CreatedAt))
		if e := h.Explain; e != nil {
			// One result and its ranking at a time: the line below would
			// widen the table's columns.
			tw.Flush()
			fmt.Fprintf(out, "      %s\n", explainHit(e))
		}
	}
	tw.Flush()
	if ex := res.Explain; ex != nil {
		kind := "semantic"
		if !ex.Semantic {
			kind = "lexical"
		}
		fmt.Fprintf(out, "\nRanked by BM25 and %s vectors (%s), fused by %s over up to %d candidates each.\n", kind, ex.Embedder, ex.Fusion, ex.Candidates)
		for _, n := range ex.Notes {
			fmt.Fprintf(out, "Note: %s.\n", n)
		}
	}
}

// explainHit is one result's ranking in a line.
func explainHit(e *belay.HitExplain) string {
	bm25, vec := "no words in common", "no vector yet"
	if e.BM25Rank > 0 {
		bm25 = fmt.Sprintf("#%d (%.2f)", e.BM25Rank, e.BM25Score)
	}
	if e.HasVector {
		vec = fmt.Sprintf("similarity %.3f", e.Similarity)
		if e.VectorRank > 0 {
			vec = fmt.Sprintf("#%d (%s)", e.VectorRank, vec)
		}
	}
	return fmt.Sprintf("bm25 %s · vector %s · fused %.4f", bm25, vec, e.Fused)
}

func (a *app) reindexCommand() *cobra.Command {
	var in belay.ReindexInput
	var noWait bool
	cmd := &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild search vectors with the current embedding model (admins)",
		Long: `Make the search index the current embedding model's: every checkpoint without
a vector of that model (--all: every checkpoint) is queued and embedded. On a
terminal it shows progress. With BELAY_URL the server embeds; the command waits
for it unless --no-wait.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, svc, err := a.open(cmd)
			if err != nil {
				return err
			}
			st, err := svc.Reindex(ctx, in)
			if err != nil {
				return err
			}
			if !noWait {
				if st, err = a.waitIndexed(ctx, svc, st); err != nil {
					return err
				}
			}
			if a.json {
				return a.printJSON(st)
			}
			a.printIndexStatus(st)
			if st.Failing > 0 && !noWait {
				return fmt.Errorf("%d checkpoints could not be embedded yet: %s", st.Failing, st.LastError)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&in.All, "all", false, "re-embed every checkpoint, not only those without a vector of the current model")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "queue and return; the server embeds in the background")
	return cmd
}

// reindexPoll is how often a remote reindex asks the server how far it got.
const reindexPoll = 500 * time.Millisecond

// waitIndexed embeds the queue (locally) or waits for the server to (remotely)
// until nothing is left but failures, showing progress on a terminal.
func (a *app) waitIndexed(ctx context.Context, svc belay.Service, st *belay.IndexStatus) (*belay.IndexStatus, error) {
	tty := writerIsTerminal(a.env.Stderr) && !a.json
	show := func(done, queued int64) {
		if tty {
			fmt.Fprintf(a.env.Stderr, "\rembedding: %d of %d", done, queued)
		}
	}
	queued := st.Queued
	if a.local != nil {
		if err := a.indexLocal(ctx, show); err != nil {
			fmt.Fprintf(a.env.Stderr, "\nbelay: %v\n", err)
		}
	} else {
		for st.Queued > st.Failing {
			show(queued-st.Queued, queued)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(reindexPoll):
			}
			var err error
			if st, err = svc.IndexStatus(ctx); err != nil {
				return nil, err
			}
		}
		show(queued-st.Queued, queued)
	}
	if tty {
		fmt.Fprintln(a.env.Stderr)
	}
	return svc.IndexStatus(ctx)
}

func (a *app) printIndexStatus(st *belay.IndexStatus) {
	kind := "semantic"
	if !st.Semantic {
		kind = "lexical"
	}
	model := st.Model
	if model == "" {
		model = "(none yet)"
	}
	fmt.Fprintf(a.env.Stdout, "Search index: model %s, %d dimensions; this service embeds with %s (%s).\n", model, st.Dimensions, st.Embedder, kind)
	fmt.Fprintf(a.env.Stdout, "%d of %d checkpoints embedded, %d queued", st.Embedded, st.Checkpoints, st.Queued)
	if st.Failing > 0 {
		fmt.Fprintf(a.env.Stdout, ", %d failing (%s)", st.Failing, st.LastError)
	}
	fmt.Fprintln(a.env.Stdout, ".")
}

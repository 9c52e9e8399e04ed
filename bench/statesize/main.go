// Command statesize measures what checkpoints of a large agent state cost on
// disk (issue 12): a run of -steps checkpoints over a state of -docs
// documents of 1 KiB (1000 make about 1 MB), one document changing per
// step, saved through the core service on SQLite and on PostgreSQL, beside
// what a copy of the state per checkpoint would take:
//
//	go run ./bench/statesize -steps 100 -docs 1000 -url postgres://…
//
// Without -url it uses BELAY_TEST_POSTGRES_URL, and without either it
// measures SQLite alone. PostgreSQL runs in a fresh schema, dropped at the end.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"path/filepath"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/sqlite"
)

// corpus is the agent state: documents of 1000 bytes of text.
type corpus struct {
	Step int      `json:"step"`
	Docs []string `json:"docs"`
}

func text(r *mrand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz     "[r.IntN(31)]
	}
	return string(b)
}

func main() {
	steps := flag.Int("steps", 100, "checkpoints to save")
	docs := flag.Int("docs", 1000, "documents of 1000 bytes in the state")
	pgURL := flag.String("url", os.Getenv("BELAY_TEST_POSTGRES_URL"), "PostgreSQL server (default $BELAY_TEST_POSTGRES_URL)")
	flag.Parse()
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "bench", Admin: true})
	dir, err := os.MkdirTemp("", "belay-statesize-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	path := filepath.Join(dir, "belay.db")
	reopen := func() store.Store {
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			log.Fatal(err)
		}
		return db
	}
	// Closing the database folds its write-ahead log into the file, so the
	// file's size is what stays on disk.
	sqliteSize := func(st store.Store) int64 {
		if err := st.Close(); err != nil {
			log.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			log.Fatal(err)
		}
		return fi.Size()
	}
	empty := sqliteSize(reopen())
	db := reopen()
	state := run(ctx, db, dir, *steps, *docs)
	report("SQLite", sqliteSize(db)-empty, *steps, state)

	if *pgURL == "" {
		fmt.Println("PostgreSQL: no server (pass -url or set BELAY_TEST_POSTGRES_URL); skipped.")
		return
	}
	schemaURL, drop := freshSchema(ctx, *pgURL)
	defer drop()
	pg, err := postgres.Open(ctx, schemaURL)
	if err != nil {
		log.Fatal(err)
	}
	defer pg.Close()
	before, err := pg.Size(ctx)
	if err != nil {
		log.Fatal(err)
	}
	state = run(ctx, pg, dir, *steps, *docs)
	after, err := pg.Size(ctx)
	if err != nil {
		log.Fatal(err)
	}
	report("PostgreSQL", after-before, *steps, state)
}

// run saves steps checkpoints of a state of docs documents, one changing
// per step, and returns the state's size.
func run(ctx context.Context, st store.Store, project string, steps, docs int) int {
	svc := core.New(core.Options{Store: st})
	defer svc.Close()
	r := mrand.New(mrand.NewPCG(1, 1))
	c := corpus{Docs: make([]string, docs)}
	for i := range c.Docs {
		c.Docs[i] = text(r, 1000)
	}
	size := 0
	for step := 1; step <= steps; step++ {
		c.Step = step
		if step > 1 {
			c.Docs[(step*37)%docs] = text(r, 1000)
		}
		b, err := json.Marshal(c)
		if err != nil {
			log.Fatal(err)
		}
		size = len(b)
		_, err = svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{ProjectPath: project, Summary: fmt.Sprintf("step %d", step), AgentState: b})
		if err != nil {
			log.Fatal(err)
		}
	}
	return size
}

func report(driver string, grew int64, steps, state int) {
	naive := int64(steps) * int64(state)
	fmt.Printf("%-10s  %d checkpoints of a %.2f MB state changing 1 KB per step: the database grew by %.2f MB; a copy per checkpoint: %.1f MB (%.0fx)\n",
		driver, steps, float64(state)/1e6, float64(grew)/1e6, float64(naive)/1e6, float64(naive)/float64(grew))
}

// freshSchema creates an empty schema and returns a URL whose connections
// use it, and a function that drops it.
func freshSchema(ctx context.Context, base string) (string, func()) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "belay_statesize_" + hex.EncodeToString(b)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		log.Fatalf("create schema: %v", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		log.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA "+name+" CASCADE")
		admin.Close()
	}
}

// Command postgres measures belay on PostgreSQL beside the embedded SQLite
// store, through the core service (validation, checksum and event log
// included): checkpoint create throughput with 1, 16 and 64 writers, list
// latency over many checkpoints, and decision latency across two services
// (two instances) sharing one database; the create run also runs in several
// processes of this program (-instances), each an instance with its own pool:
//
//	go run ./bench/postgres -url postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// Without -url it uses BELAY_TEST_POSTGRES_URL, and without either it says
// so and exits. Every run works in a fresh schema, dropped at the end.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/benchutil"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/store/postgres"
	"github.com/belayhq/belay/store/sqlite"
)

func main() {
	pgURL := flag.String("url", os.Getenv("BELAY_TEST_POSTGRES_URL"), "PostgreSQL server (default $BELAY_TEST_POSTGRES_URL)")
	n := flag.Int("n", 5000, "checkpoints to create per throughput run")
	stateSize := flag.Int("state", 2048, "bytes of agent state per checkpoint")
	workers := flag.String("workers", "1,16,64", "concurrent creators: one create run per comma-separated count")
	rows := flag.Int("rows", 100000, "checkpoints in the database for the list run (0: skip)")
	queries := flag.Int("queries", 300, "list queries per filter")
	decisions := flag.Int("decisions", 300, "decisions for the cross-instance latency run")
	instances := flag.Int("instances", 3, "processes for the several-instance create run (0: skip)")
	child := flag.Bool("child", false, "run as one instance of the several-instance run (internal)")
	flag.Parse()
	if *child {
		runChild(*pgURL, *n, *stateSize, *workers)
		return
	}
	if *pgURL == "" {
		fmt.Println("bench/postgres: no PostgreSQL server: pass -url postgres://… or set BELAY_TEST_POSTGRES_URL; skipped.")
		return
	}
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "bench", Admin: true})
	dir, err := os.MkdirTemp("", "belay-bench-pg-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b := &bench{base: *pgURL, dir: dir}
	defer b.dropSchemas()
	fmt.Printf("belay PostgreSQL benchmark: %s, GOMAXPROCS %d\n\n", redact(*pgURL), runtime.GOMAXPROCS(0))

	state := benchutil.State(*stateSize)
	fmt.Printf("create: %d checkpoints with %d B agent state, one session per writer (checkpoints/s)\n", *n, *stateSize)
	many := fmt.Sprintf("PG %d procs", *instances)
	fmt.Printf("%8s %12s %12s %12s\n", "writers", "SQLite", "PostgreSQL", many)
	for _, field := range strings.Split(*workers, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || w < 1 {
			log.Fatalf("-workers: %q is not a positive count", field)
		}
		lite := b.sqlite(ctx, fmt.Sprintf("create-%d.db", w))
		lr := create(ctx, lite, dir, state, *n, w)
		lite.close()
		pg := b.postgres(ctx)
		pr := create(ctx, pg, dir, state, *n, w)
		pg.close()
		mr := "-"
		if *instances > 1 && w >= *instances {
			mr = fmt.Sprintf("%.0f", b.processes(ctx, *instances, *n, *stateSize, w))
		}
		fmt.Printf("%8d %12.0f %12.0f %12s\n", w, lr, pr, mr)
	}

	if *rows > 0 {
		fmt.Printf("\nlist: %d checkpoints over 100 sessions, limit 20 with totalCount, %d queries per filter\n", *rows, *queries)
		lite := b.sqlite(ctx, "list.db")
		pg := b.postgres(ctx)
		lf, lload := listRun(ctx, lite, dir, *rows, *queries)
		pf, pload := listRun(ctx, pg, dir, *rows, *queries)
		fmt.Printf("(loaded in %s on SQLite, %s on PostgreSQL, 20 loaders)\n", lload, pload)
		fmt.Printf("%-14s %10s %10s   %10s %10s\n", "filter", "SQLite p50", "p99", "PG p50", "p99")
		for i := range lf {
			fmt.Printf("%-14s %10s %10s   %10s %10s\n", lf[i].name, benchutil.Percentile(lf[i].lat, 50), benchutil.Percentile(lf[i].lat, 99), benchutil.Percentile(pf[i].lat, 50), benchutil.Percentile(pf[i].lat, 99))
		}
		lite.close()
		pg.close()
	}

	if *decisions > 0 {
		fmt.Printf("\ndecision → WaitDecision returns, %d decisions (target p99 <= 10ms)\n", *decisions)
		lite := b.sqlite(ctx, "hitl.db")
		fmt.Println("(total: Decide called → WaitDecision returned; commit: the Decide call alone, its durable commit included)")
		same, sameCommit := decideRun(ctx, lite.svc, lite.svc, dir, *decisions)
		lite.close()
		url := b.schema(ctx)
		a, c := open(ctx, url), open(ctx, url)
		across, acrossCommit := decideRun(ctx, a.svc, c.svc, dir, *decisions)
		for _, r := range []struct {
			name      string
			lat, comm []time.Duration
		}{{"SQLite, one service", same, sameCommit}, {"PostgreSQL, decide on A, wait on B", across, acrossCommit}} {
			fmt.Printf("%-36s total p50 %8s p99 %8s max %8s | commit p50 %8s p99 %8s\n", r.name,
				benchutil.Percentile(r.lat, 50), benchutil.Percentile(r.lat, 99), benchutil.Percentile(r.lat, 100), benchutil.Percentile(r.comm, 50), benchutil.Percentile(r.comm, 99))
		}
		a.close()
		c.close()
	}
}

// bench holds the schemas it made, to drop them.
type bench struct {
	base, dir string
	schemas   []string
}

type instance struct {
	db  store.Store
	svc *core.Service
}

func (i instance) close() {
	i.svc.Close()
	i.db.Close()
}

func (b *bench) sqlite(ctx context.Context, name string) instance {
	db, err := sqlite.Open(ctx, filepath.Join(b.dir, name))
	if err != nil {
		log.Fatal(err)
	}
	return instance{db: db, svc: core.New(core.Options{Store: db})}
}

func (b *bench) postgres(ctx context.Context) instance { return open(ctx, b.schema(ctx)) }

func open(ctx context.Context, url string) instance {
	db, err := postgres.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	return instance{db: db, svc: core.New(core.Options{Store: db})}
}

// schema creates a fresh schema and returns a URL whose connections use it.
func (b *bench) schema(ctx context.Context) string {
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	name := "belay_bench_" + hex.EncodeToString(r)
	admin, err := sql.Open("pgx", b.base)
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		log.Fatalf("create schema: %v", err)
	}
	b.schemas = append(b.schemas, name)
	u, err := url.Parse(b.base)
	if err != nil {
		log.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func (b *bench) dropSchemas() {
	admin, err := sql.Open("pgx", b.base)
	if err != nil {
		return
	}
	defer admin.Close()
	for _, s := range b.schemas {
		_, _ = admin.Exec("DROP SCHEMA " + s + " CASCADE")
	}
}

// create makes n checkpoints with workers writers, each in its own session,
// and returns checkpoints per second.
func create(ctx context.Context, in instance, project string, state json.RawMessage, n, workers int) float64 {
	sessions := writerSessions(ctx, in, project, workers)
	start := time.Now()
	writeAll(ctx, in, sessions, state, n)
	return float64(n) / time.Since(start).Seconds()
}

// writerSessions makes a session for each of workers writers.
func writerSessions(ctx context.Context, in instance, project string, workers int) []string {
	sessions := make([]string, workers)
	for w := range sessions {
		s, err := in.svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: project, Title: fmt.Sprint("writer ", w)})
		if err != nil {
			log.Fatal(err)
		}
		sessions[w] = s.ID
	}
	return sessions
}

// writeAll creates n checkpoints, one writer per session at once.
func writeAll(ctx context.Context, in instance, sessions []string, state json.RawMessage, n int) {
	workers := len(sessions)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				_, err := in.svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{
					SessionID: sessions[w], Summary: fmt.Sprintf("step %d", i), Type: belay.TypeAuto,
					Trigger: belay.TriggerPeriodic, AgentState: state, Tags: []string{"bench"},
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
}

type filterLat struct {
	name string
	lat  []time.Duration
}

// listRun loads rows checkpoints over 100 sessions with 16 loaders, then
// times each filter.
func listRun(ctx context.Context, in instance, project string, rows, queries int) ([]filterLat, time.Duration) {
	var sessions []string
	for i := range 100 {
		s, err := in.svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: project, Title: fmt.Sprint("s", i)})
		if err != nil {
			log.Fatal(err)
		}
		sessions = append(sessions, s.ID)
	}
	small := benchutil.State(256)
	types := []belay.CheckpointType{belay.TypeAuto, belay.TypePhase, belay.TypeManual, belay.TypeError}
	// Each loader owns its sessions (loader k those whose index is k modulo
	// loaders): on PostgreSQL two creators racing in one session can both
	// read the session's last seq and one fails on the (session_id, seq)
	// unique key, as the session row is not locked when read.
	const loaders = 20
	start := time.Now()
	var wg sync.WaitGroup
	for k := range loaders {
		wg.Go(func() {
			for i := k; i < rows; i += loaders {
				cin := belay.CreateCheckpointInput{SessionID: sessions[i%len(sessions)], Summary: fmt.Sprintf("step %d", i),
					Type: types[i%len(types)], AgentState: small}
				if i%10 == 0 {
					cin.Tags = []string{"tests", fmt.Sprint("t", i%7)}
				}
				if _, err := in.svc.CreateCheckpoint(ctx, cin); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	load := time.Since(start).Round(time.Millisecond)
	yes := true
	filters := []struct {
		name string
		in   belay.ListCheckpointsInput
	}{
		{"session", belay.ListCheckpointsInput{SessionID: sessions[7]}},
		{"type", belay.ListCheckpointsInput{Type: belay.TypePhase}},
		{"session+type", belay.ListCheckpointsInput{SessionID: sessions[3], Type: belay.TypeAuto}},
		{"tags", belay.ListCheckpointsInput{Tags: []string{"tests", "t3"}}},
		{"hitlRequired", belay.ListCheckpointsInput{HITLRequired: &yes}},
		{"project", belay.ListCheckpointsInput{ProjectPath: project}},
		{"none", belay.ListCheckpointsInput{}},
	}
	var out []filterLat
	for _, f := range filters {
		lat := make([]time.Duration, 0, queries)
		for range queries {
			t := time.Now()
			if _, err := in.svc.ListCheckpoints(ctx, f.in); err != nil {
				log.Fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		slices.Sort(lat)
		out = append(out, filterLat{f.name, lat})
	}
	return out, load
}

// decideRun asks on asker, waits on waiter and decides on asker: the time
// from the decide call until WaitDecision returns, and the time the decide
// call itself took.
func decideRun(ctx context.Context, asker, waiter *core.Service, project string, n int) (total, commit []time.Duration) {
	s, err := asker.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: project, Title: "hitl"})
	if err != nil {
		log.Fatal(err)
	}
	lat := make([]time.Duration, 0, n)
	call := make([]time.Duration, 0, n)
	for i := range n {
		cp, err := asker.CreateCheckpoint(ctx, belay.CreateCheckpointInput{SessionID: s.ID, Summary: fmt.Sprint("request ", i),
			Type: belay.TypeHITL, HITL: &belay.HITLInput{Required: true}})
		if err != nil {
			log.Fatal(err)
		}
		returned := make(chan time.Time, 1)
		go func() {
			res, err := waiter.WaitDecision(ctx, cp.ID, 30*time.Second)
			if err != nil || !res.Decided {
				log.Fatalf("WaitDecision: %+v, %v", res, err)
			}
			returned <- time.Now()
		}()
		time.Sleep(3 * time.Millisecond) // let the waiter settle into its wait
		t0 := time.Now()
		if _, err := asker.Decide(ctx, belay.DecideInput{CheckpointID: cp.ID, Action: belay.ActionApprove, SelectedOption: "approve"}); err != nil {
			log.Fatal(err)
		}
		call = append(call, time.Since(t0))
		lat = append(lat, (<-returned).Sub(t0))
	}
	slices.Sort(lat)
	slices.Sort(call)
	return lat, call
}

// processes runs the create run in k processes of this program, each its own
// instance with its own pool, on one fresh schema, writers split between
// them, started together: checkpoints per second of all of them.
func (b *bench) processes(ctx context.Context, k, n, stateSize, writers int) float64 {
	url := b.schema(ctx)
	open(ctx, url).close() // migrate once, before the children race to
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	procs := make([]proc, k)
	for i := range procs {
		cmd := exec.Command(self, "-child", "-url", url, "-n", strconv.Itoa(n/k), "-state", strconv.Itoa(stateSize),
			"-workers", strconv.Itoa(writers/k))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			log.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			log.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		procs[i] = proc{cmd, in, bufio.NewScanner(out)}
		if !procs[i].out.Scan() || procs[i].out.Text() != "ready" {
			log.Fatalf("instance %d did not get ready", i)
		}
	}
	for _, p := range procs {
		fmt.Fprintln(p.in, "go")
	}
	var first, last int64
	total := 0
	for _, p := range procs {
		var made int
		var from, to int64
		if !p.out.Scan() {
			log.Fatal("an instance ended without its result")
		}
		if _, err := fmt.Sscan(p.out.Text(), &made, &from, &to); err != nil {
			log.Fatalf("instance result %q: %v", p.out.Text(), err)
		}
		if err := p.cmd.Wait(); err != nil {
			log.Fatal(err)
		}
		total += made
		if first == 0 || from < first {
			first = from
		}
		last = max(last, to)
	}
	return float64(total) / time.Duration(last-first).Seconds()
}

// runChild is one instance of the several-instance run: it opens the
// database, makes its writers' sessions, says "ready", waits for "go" on
// stdin, creates n checkpoints and prints how many, and when it started and
// ended (Unix nanoseconds).
func runChild(url string, n, stateSize int, workers string) {
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "bench", Admin: true})
	w, err := strconv.Atoi(workers)
	if err != nil || w < 1 {
		log.Fatalf("-workers %q", workers)
	}
	in := open(ctx, url)
	defer in.close()
	dir, err := os.MkdirTemp("", "belay-bench-pg-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sessions := writerSessions(ctx, in, dir, w)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	writeAll(ctx, in, sessions, benchutil.State(stateSize), n)
	fmt.Println(n, start.UnixNano(), time.Now().UnixNano())
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the server"
	}
	return p.Redacted()
}

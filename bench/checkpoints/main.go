// Command checkpoints measures belay's checkpoint throughput and list latency
// on the embedded SQLite store, through the core service (validation,
// checksum and event log included), beside the disk's fsync latency and
// LangGraph.js's SQLite checkpoint saver (bench/checkpoints/node, installed
// with npm ci on first use) saving the same agent state:
//
//	go run ./bench/checkpoints -n 5000 -rounds 5 -state 2048 -rows 100000
//
// -durability relaxed measures the opt-in synchronous=NORMAL mode instead of
// the default (full); LangGraph's saver then runs with its own default
// (NORMAL in WAL mode), and with synchronous=FULL otherwise.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/benchutil"
	"github.com/belayhq/belay/store/sqlite"
)

func main() {
	n := flag.Int("n", 5000, "checkpoints to create per throughput round")
	rounds := flag.Int("rounds", 5, "throughput rounds per writer count; the median is reported")
	stateSize := flag.Int("state", 2048, "bytes of agent state per checkpoint")
	workers := flag.String("workers", "1,16", "concurrent creators: comma-separated counts, each measured every round")
	rows := flag.Int("rows", 100000, "checkpoints in the database for the list run; 0 skips it")
	queries := flag.Int("queries", 500, "list queries per filter")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the create rounds here")
	frames := flag.Int("frames", 10, "write-ahead log frames one checkpoint's commit writes (TestWALPagesPerCheckpoint measures it), for the commit-sized sync ceiling")
	perRound := flag.Int("sessions", 1, "sessions the writers of a round save to, writer i to session i mod sessions: 1 is one agent's parallel saves, as many as writers is independent agents")
	langgraph := flag.String("langgraph", "bench/checkpoints/node", "directory of the LangGraph.js saver bench; empty skips it")
	var durability sqlite.Durability
	flag.Var(&durability, "durability", "full or relaxed: what a commit waits for")
	flag.Parse()
	counts, err := parseCounts(*workers)
	if err != nil {
		log.Fatal(err)
	}
	if *perRound < 1 {
		log.Fatalf("-sessions must be at least 1, got %d", *perRound)
	}
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "bench", Admin: true})
	dir, err := os.MkdirTemp("", "belay-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fmt.Printf("%d cores (GOMAXPROCS %d), load %s, SQLite driver %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAverage(), sqlite.Driver)

	durable := durability == sqlite.Full
	if durable {
		fmt.Printf("every round also measures the disk, beside belay and LangGraph.js (a disk's speed drifts): the p50 of writing\n"+
			"and fsyncing one log frame, and %d frames (%d KiB, what one checkpoint's commit writes) with one write; and a bare\n"+
			"SQLite insert of one %d B row by its key (synchronous=FULL, SQLite's own VFS, one writer)\n",
			*frames, *frames*frameSize/1024, *stateSize)
	}

	state := benchutil.State(*stateSize)
	lg := newLangGraph(*langgraph, dir, durability)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	// Rounds interleave belay, the disk's references and LangGraph, so a busy
	// machine or a slow phase of the disk weighs on all of them alike; a
	// one-writer share is taken of the references measured in its round.
	rates, cpu := map[int][]float64{}, map[int][]float64{}
	var lgRates []float64
	var disk []diskRound
	for r := range *rounds {
		var d diskRound
		if durable {
			d = measureDisk(dir, *frames, *stateSize, r)
			disk = append(disk, d)
		}
		for _, w := range counts {
			rate, perCheckpoint := createRound(ctx, dir, durability, state, *n, w, *perRound, r)
			rates[w] = append(rates[w], rate)
			cpu[w] = append(cpu[w], perCheckpoint)
			if w == 1 && durable {
				disk[r].share = [3]float64{rate / d.ceiling, rate / d.commitCeiling, rate / d.bare}
			}
		}
		if lg != nil {
			lgRates = append(lgRates, lg.round(state, *n, r))
		}
	}
	pprof.StopCPUProfile()
	if durable {
		printDisk(disk, *frames)
	}
	fmt.Printf("create: %d checkpoints with %d B agent state per round into %d session(s), durability %s, median of %d rounds (min-max); load %s\n",
		*n, *stateSize, *perRound, durability, *rounds, loadAverage())
	for _, w := range counts {
		med := median(rates[w])
		line := fmt.Sprintf("  belay %2d writer(s): %6.0f checkpoints/s (%.0f-%.0f), %3.0f µs CPU each",
			w, med, slices.Min(rates[w]), slices.Max(rates[w]), median(cpu[w]))
		if w == 1 && durable {
			line += fmt.Sprintf(", %.0f%% of its round's fsync ceiling (target >= 70%%), %.0f%% of the %d-frame commit's, %.0f%% of the bare insert's (medians over the rounds)",
				100*medianOf(disk, func(d diskRound) float64 { return d.share[0] }),
				100*medianOf(disk, func(d diskRound) float64 { return d.share[1] }), *frames,
				100*medianOf(disk, func(d diskRound) float64 { return d.share[2] }))
		}
		if w > 1 && durable {
			line += " (target >= 10000/s)"
		}
		if w == 1 && durability == sqlite.Relaxed {
			line += " (target >= 5000/s)"
		}
		if len(lgRates) > 0 {
			line += fmt.Sprintf("; %.2fx LangGraph.js", med/median(lgRates))
		}
		fmt.Println(line)
	}
	if len(lgRates) > 0 {
		fmt.Printf("  LangGraph.js SqliteSaver.put, 1 writer: %6.0f puts/s (%.0f-%.0f), %s\n",
			median(lgRates), slices.Min(lgRates), slices.Max(lgRates), lg.settings)
	}
	if *rows == 0 {
		return
	}

	// A fresh database with rows checkpoints over 100 sessions, then timed lists.
	db, err := sqlite.Open(ctx, filepath.Join(dir, "list.db"), sqlite.WithDurability(durability))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})
	var sessions []string
	for i := 0; i < 100; i++ {
		s, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: dir, Title: fmt.Sprint("s", i)})
		if err != nil {
			log.Fatal(err)
		}
		sessions = append(sessions, s.ID)
	}
	small := benchutil.State(256)
	start := time.Now()
	types := []belay.CheckpointType{belay.TypeAuto, belay.TypePhase, belay.TypeManual, belay.TypeError}
	for i := 0; i < *rows; i++ {
		in := belay.CreateCheckpointInput{SessionID: sessions[i%len(sessions)], Summary: fmt.Sprintf("step %d", i),
			Type: types[i%len(types)], AgentState: small}
		if i%10 == 0 {
			in.Tags = []string{"tests", fmt.Sprint("t", i%7)}
		}
		if _, err := svc.CreateCheckpoint(ctx, in); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("loaded %d checkpoints in %s\n", *rows, time.Since(start).Round(time.Millisecond))
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
		{"project", belay.ListCheckpointsInput{ProjectPath: dir}},
		{"none", belay.ListCheckpointsInput{}},
	}
	fmt.Printf("%-14s %10s %10s %10s   (limit 20, with totalCount; target p50 <= 5ms)\n", "list filter", "p50", "p99", "max")
	for _, f := range filters {
		var lat []time.Duration
		for i := 0; i < *queries; i++ {
			t := time.Now()
			if _, err := svc.ListCheckpoints(ctx, f.in); err != nil {
				log.Fatal(err)
			}
			lat = append(lat, time.Since(t))
		}
		slices.Sort(lat)
		fmt.Printf("%-14s %10s %10s %10s\n", f.name, benchutil.Percentile(lat, 50), benchutil.Percentile(lat, 99), lat[len(lat)-1].Round(time.Microsecond))
	}
}

func parseCounts(list string) ([]int, error) {
	var counts []int
	for _, field := range strings.Split(list, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || w < 1 {
			return nil, fmt.Errorf("-workers: %q is not a positive count", field)
		}
		counts = append(counts, w)
	}
	return counts, nil
}

// createRound creates n checkpoints with w concurrent writers in a fresh
// database, writer i in session i mod sessions, and returns the rate and the
// process's CPU time (user and system) per checkpoint in microseconds, which
// a busy machine disturbs less than the rate.
func createRound(ctx context.Context, dir string, durability sqlite.Durability, state json.RawMessage, n, w, sessions, round int) (float64, float64) {
	db, err := sqlite.Open(ctx, filepath.Join(dir, fmt.Sprintf("create-%d-%d.db", w, round)), sqlite.WithDurability(durability))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})
	ids := make([]string, sessions)
	for i := range ids {
		sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: dir, Title: fmt.Sprint("bench ", i)})
		if err != nil {
			log.Fatal(err)
		}
		ids[i] = sess.ID
	}
	var wg sync.WaitGroup
	cpuStart := cpuTime()
	start := time.Now()
	for w0 := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w0; i < n; i += w {
				_, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{
					SessionID: ids[w0%sessions], Summary: fmt.Sprintf("step %d", i), Type: belay.TypeAuto,
					Trigger: belay.TriggerPeriodic, AgentState: state, Tags: []string{"bench"},
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	return float64(n) / elapsed.Seconds(), float64((cpuTime()-cpuStart)/time.Microsecond) / float64(n)
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// diskRound is what a round measured of the disk: the rate a sequential
// durable writer cannot pass when each commit costs one frame's sync, one
// checkpoint's frames' sync, or a bare SQLite insert; and belay's one writer
// as a share of each.
type diskRound struct {
	fsyncP50, commitP50          time.Duration
	ceiling, commitCeiling, bare float64
	share                        [3]float64
}

func measureDisk(dir string, frames, stateSize, round int) diskRound {
	d := diskRound{fsyncP50: fsyncLatency(dir, 1, 200), commitP50: fsyncLatency(dir, frames, 200)}
	d.ceiling = float64(time.Second) / float64(d.fsyncP50)
	d.commitCeiling = float64(time.Second) / float64(d.commitP50)
	d.bare = bareInsert(dir, stateSize, round)
	return d
}

// printDisk prints the disk's references, median of the rounds (min-max).
func printDisk(disk []diskRound, frames int) {
	span := func(f func(diskRound) float64) string {
		xs := values(disk, f)
		return fmt.Sprintf("%.0f/s (%.0f-%.0f)", median(xs), slices.Min(xs), slices.Max(xs))
	}
	fmt.Printf("fsync p50 %s: one sequential durable writer cannot pass %s\n",
		time.Duration(medianOf(disk, func(d diskRound) float64 { return float64(d.fsyncP50) })).Round(time.Microsecond),
		span(func(d diskRound) float64 { return d.ceiling }))
	fmt.Printf("%d frames with one write, synced, p50 %s: a durable writer writing what one checkpoint writes cannot pass %s\n",
		frames, time.Duration(medianOf(disk, func(d diskRound) float64 { return float64(d.commitP50) })).Round(time.Microsecond),
		span(func(d diskRound) float64 { return d.commitCeiling }))
	fmt.Printf("bare SQLite insert, 1 writer: %s, %.0f%% of its round's fsync ceiling\n",
		span(func(d diskRound) float64 { return d.bare }),
		100*medianOf(disk, func(d diskRound) float64 { return d.bare / d.ceiling }))
}

// values returns f of each round.
func values(disk []diskRound, f func(diskRound) float64) []float64 {
	xs := make([]float64, len(disk))
	for i, d := range disk {
		xs[i] = f(d)
	}
	return xs
}

func medianOf(disk []diskRound, f func(diskRound) float64) float64 {
	return median(values(disk, f))
}

// frameSize is the size of a write-ahead log frame: a 24-byte header and a
// 4 KiB page.
const frameSize = 24 + 4096

// fsyncLatency returns the median time to write frames log frames (with one
// write, as belay's VFS writes a commit's frames) into a file at the size the
// log works at, and fsync it: with one frame, the least a durable commit
// costs; with as many as a checkpoint's commit writes, what that commit costs
// the disk.
func fsyncLatency(dir string, frames, samples int) time.Duration {
	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	const size = 4 << 20
	page := bytes.Repeat([]byte{1}, 4096)
	for off := int64(0); off < size; off += int64(len(page)) {
		if _, err := f.WriteAt(page, off); err != nil {
			log.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		log.Fatal(err)
	}
	commit := bytes.Repeat([]byte{1}, frames*frameSize)
	lat := make([]time.Duration, 0, samples)
	off := int64(0)
	for range samples {
		start := time.Now()
		if off+int64(len(commit)) > size {
			off = 0
		}
		if _, err := f.WriteAt(commit, off); err != nil {
			log.Fatal(err)
		}
		off += int64(len(commit))
		if err := f.Sync(); err != nil {
			log.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	return lat[len(lat)/2]
}

// bareInsert returns the rate of one writer inserting 1,000 rows of size
// bytes by a text key into a table with no other index, each commit synced
// by SQLite itself: the least a durable SQLite commit costs through this
// driver, beside which belay's one-writer rate can be read.
func bareInsert(dir string, size, round int) float64 {
	driver := "sqlite"
	if sqlite.Driver != "modernc.org/sqlite" {
		driver = "sqlite3"
	}
	db, err := sql.Open(driver, filepath.Join(dir, fmt.Sprintf("bare-%d.db", round))+"?_pragma=journal_mode(WAL)&_pragma=synchronous(2)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	row := bytes.Repeat([]byte{'x'}, size)
	const n = 1000
	start := time.Now()
	for i := range n {
		if _, err := db.Exec("INSERT INTO t (k, v) VALUES (?, ?)", fmt.Sprintf("%08d", i), row); err != nil {
			log.Fatal(err)
		}
	}
	return n / time.Since(start).Seconds()
}

// langGraph runs LangGraph.js's SQLite saver bench (node put.mjs).
type langGraph struct {
	dir, dataDir, synchronous string
	settings                  string
}

// newLangGraph installs the saver bench's locked dependencies when needed,
// or returns nil, saying why, when node or npm cannot run it.
func newLangGraph(dir, dataDir string, durability sqlite.Durability) *langGraph {
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Printf("LangGraph.js skipped: npm ci in %s: %v\n%s", dir, err, out)
			return nil
		}
	}
	synchronous := "full"
	if durability == sqlite.Relaxed {
		synchronous = "default"
	}
	return &langGraph{dir: dir, dataDir: dataDir, synchronous: synchronous}
}

func (lg *langGraph) round(state json.RawMessage, n, round int) float64 {
	db := filepath.Join(lg.dataDir, fmt.Sprintf("langgraph-%d.db", round))
	cmd := exec.Command("node", "put.mjs", db, strconv.Itoa(n), lg.synchronous)
	cmd.Dir = lg.dir
	cmd.Stdin = bytes.NewReader(state)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("LangGraph.js saver bench: %v", err)
	}
	var res struct {
		PutsPerSecond float64 `json:"putsPerSecond"`
		JournalMode   string  `json:"journalMode"`
		Synchronous   int     `json:"synchronous"`
		SQLite        string  `json:"sqlite"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		log.Fatalf("LangGraph.js saver bench said %q: %v", out, err)
	}
	lg.settings = fmt.Sprintf("SQLite %s, journal_mode=%s, synchronous=%d", res.SQLite, res.JournalMode, res.Synchronous)
	return res.PutsPerSecond
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

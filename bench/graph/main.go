// Command graph measures the graph runtime against LangGraph.js on the same
// workflow: plan → review (an interrupt) → finalize, N runs each taken to
// its interrupt and resumed to the end, every step saved to SQLite before
// the next (belay's sync durability; LangGraph's durability "sync" with its
// SQLite checkpointer), one run at a time and 16 at once.
//
//	go run ./bench/graph -n 1000 -reps 5
//
// It installs the pinned LangGraph.js packages with `npm ci` in
// bench/graph/node when they are missing, runs both sides -reps times
// alternately, and prints the median runs/s of each, their ratio, and the
// latency of an in-process Resume (belay) and of invoke(Command({resume}))
// (LangGraph.js). belay runs at its default synchronous=FULL, and again at
// synchronous=NORMAL (-relaxed), which is what LangGraph's checkpointer uses
// (better-sqlite3 builds with WAL synchronous=NORMAL).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/graph"
	"github.com/belayhq/belay/store/sqlite"
)

// Draft is the workflow's state.
type Draft struct {
	Topic   string `json:"topic"`
	Outline string `json:"outline"`
	Verdict string `json:"verdict"`
	Final   string `json:"final"`
}

func main() {
	n := flag.Int("n", 1000, "runs per measurement")
	reps := flag.Int("reps", 5, "repetitions of each measurement (the median is reported)")
	concurrency := flag.Int("concurrency", 16, "runs at once in the concurrent measurement")
	nodeDir := flag.String("node", "bench/graph/node", "directory of the LangGraph.js script and its package-lock")
	skipJS := flag.Bool("skip-langgraph", false, "measure belay alone")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of belay's runs to this file")
	flag.Parse()

	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "local", Admin: true})
	dir, err := os.MkdirTemp("", "belay-bench-graph-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if !*skipJS {
		if err := installLangGraph(*nodeDir); err != nil {
			log.Fatal(err)
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("graph benchmark: %d runs to the interrupt and resumed, median of %d; %d cores, GOMAXPROCS %d, load %s\n",
		*n, *reps, runtime.NumCPU(), runtime.GOMAXPROCS(0), firstFields(string(load), 3))
	fmt.Printf("%-34s %12s %12s %10s %12s %12s\n", "side", "runs/s", "LangGraph.js", "ratio", "resume p50", "resume p99")

	flow := workflow()
	for _, conc := range []int{1, *concurrency} {
		var full, relaxed, js []result
		for rep := range *reps {
			full = append(full, runBelay(ctx, flow, filepath.Join(dir, fmt.Sprintf("full-%d-%d.db", conc, rep)), sqlite.Full, *n, conc))
			relaxed = append(relaxed, runBelay(ctx, flow, filepath.Join(dir, fmt.Sprintf("relaxed-%d-%d.db", conc, rep)), sqlite.Relaxed, *n, conc))
			if !*skipJS {
				js = append(js, runLangGraph(*nodeDir, filepath.Join(dir, fmt.Sprintf("langgraph-%d-%d.db", conc, rep)), *n, conc))
			}
		}
		mode := "sequential"
		if conc > 1 {
			mode = fmt.Sprintf("%d concurrent", conc)
		}
		base := median(js)
		row := func(name string, rs []result) {
			m := median(rs)
			ratio, lg := "-", "-"
			if base.runsPerSec > 0 {
				ratio = fmt.Sprintf("%.1f×", m.runsPerSec/base.runsPerSec)
				lg = fmt.Sprintf("%.0f", base.runsPerSec)
			}
			fmt.Printf("%-34s %12.0f %12s %10s %12s %12s\n", name, m.runsPerSec, lg, ratio, m.p50.Round(time.Microsecond), m.p99.Round(time.Microsecond))
		}
		row("belay "+mode+", synchronous=FULL", full)
		row("belay "+mode+", synchronous=NORMAL", relaxed)
		if base.runsPerSec > 0 {
			fmt.Printf("%-34s %12.0f %12s %10s %12s %12s\n", "LangGraph.js "+mode+", NORMAL", base.runsPerSec, "", "1.0×",
				base.p50.Round(time.Microsecond), base.p99.Round(time.Microsecond))
		}
	}
	fmt.Println("\ntargets: belay ≥ 10× LangGraph.js runs/s; in-process resume p99 ≤ 1ms")
}

// workflow is the benchmark's graph: plan, review (an interrupt), finalize.
func workflow() *graph.Compiled[Draft] {
	flow, err := graph.New[Draft]().
		AddNode("plan", func(_ context.Context, d Draft) (Draft, error) {
			d.Outline = "outline for " + d.Topic
			return d, nil
		}).
		AddNode("review", func(ctx context.Context, d Draft) (Draft, error) {
			verdict, err := graph.Interrupt[string](ctx, graph.InterruptRequest{Title: "Approve the plan?", Message: d.Outline})
			if err != nil {
				return d, err
			}
			d.Verdict = verdict
			return d, nil
		}).
		AddNode("finalize", func(_ context.Context, d Draft) (Draft, error) {
			d.Final = d.Outline + " (" + d.Verdict + ")"
			return d, nil
		}).
		AddEdge(graph.START, "plan").AddEdge("plan", "review").AddEdge("review", "finalize").AddEdge("finalize", graph.END).
		Compile()
	if err != nil {
		log.Fatal(err)
	}
	return flow
}

// result is one measurement: runs per second and the resume latencies.
type result struct {
	runsPerSec float64
	p50, p99   time.Duration
}

// runBelay runs n runs, conc at a time, on a fresh SQLite database.
func runBelay(ctx context.Context, flow *graph.Compiled[Draft], path string, mode sqlite.Durability, n, conc int) result {
	db, err := sqlite.Open(ctx, path, sqlite.WithDurability(mode))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer svc.Close()
	project := filepath.Dir(path)
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				d, err := one(ctx, flow, svc, project, i)
				if err != nil {
					failed.Store(&err)
					return
				}
				lat[i] = d
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failed.Load(); err != nil {
		log.Fatal(*err)
	}
	slices.Sort(lat)
	return result{runsPerSec: float64(n) / elapsed.Seconds(), p50: pct(lat, 50), p99: pct(lat, 99)}
}

// one takes run i to its interrupt and resumes it to the end; it returns
// how long the Resume took.
func one(ctx context.Context, flow *graph.Compiled[Draft], svc belay.Service, project string, i int) (time.Duration, error) {
	res, err := flow.Run(ctx, svc, graph.RunInput[Draft]{ProjectPath: project, State: Draft{Topic: fmt.Sprint("topic ", i)}})
	if err != nil {
		return 0, err
	}
	if res.Status != graph.Interrupted {
		return 0, fmt.Errorf("run %d: %s, want interrupted", i, res.Status)
	}
	t := time.Now()
	res, err = flow.Resume(ctx, svc, res.RunID, graph.Command{Resume: "approved"})
	d := time.Since(t)
	if err != nil {
		return 0, err
	}
	if want := fmt.Sprintf("outline for topic %d (approved)", i); res.Status != graph.Completed || res.State.Final != want {
		return 0, fmt.Errorf("run %d: %s %q, want completed %q", i, res.Status, res.State.Final, want)
	}
	return d, nil
}

// installLangGraph installs the pinned packages of dir's package-lock.
func installLangGraph(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-checkpoint-sqlite")); err == nil {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s: %w", dir, err)
	}
	return nil
}

// runLangGraph runs the LangGraph.js side once on a fresh database.
func runLangGraph(dir, db string, n, conc int) result {
	out, err := exec.Command("node", filepath.Join(dir, "bench_graph.mjs"), db, fmt.Sprint(n), fmt.Sprint(conc)).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			log.Fatalf("LangGraph.js: %v\n%s", err, ee.Stderr)
		}
		log.Fatalf("LangGraph.js: %v", err)
	}
	var r struct {
		RunsPerSecond float64 `json:"runsPerSecond"`
		ResumeP50Ms   float64 `json:"resumeP50Ms"`
		ResumeP99Ms   float64 `json:"resumeP99Ms"`
		Synchronous   int     `json:"synchronous"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		log.Fatalf("LangGraph.js printed %q: %v", out, err)
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return result{runsPerSec: r.RunsPerSecond, p50: ms(r.ResumeP50Ms), p99: ms(r.ResumeP99Ms)}
}

// median is the measurement with the median runs/s (zero when none).
func median(rs []result) result {
	if len(rs) == 0 {
		return result{}
	}
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int {
		switch {
		case a.runsPerSec < b.runsPerSec:
			return -1
		case a.runsPerSec > b.runsPerSec:
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func firstFields(s string, n int) string {
	var out []byte
	fields := 0
	for i := 0; i < len(s) && fields < n; i++ {
		if s[i] == ' ' {
			fields++
			if fields == n {
				break
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Command checkpoints measures belay's checkpoint throughput and list latency
// on the embedded SQLite store, through the core service (validation,
// checksum and event log included):
//
//	go run ./bench/checkpoints -n 20000 -state 2048 -rows 100000
//
// -durability relaxed measures the opt-in synchronous=NORMAL mode beside the
// default (full).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store/sqlite"
)

func main() {
	n := flag.Int("n", 20000, "checkpoints to create for the throughput run")
	stateSize := flag.Int("state", 2048, "bytes of agent state per checkpoint")
	workers := flag.String("workers", "1,16", "concurrent creators: one create run per comma-separated count")
	rows := flag.Int("rows", 100000, "checkpoints in the database for the list run")
	queries := flag.Int("queries", 500, "list queries per filter")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the create run here")
	var durability sqlite.Durability
	flag.Var(&durability, "durability", "full or relaxed: what a commit waits for")
	flag.Parse()
	ctx := belay.WithActor(context.Background(), belay.Actor{UserID: "bench", Admin: true})
	dir, err := os.MkdirTemp("", "belay-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	state := makeState(*stateSize)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	for _, field := range strings.Split(*workers, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || w < 1 {
			log.Fatalf("-workers: %q is not a positive count", field)
		}
		// Each run on a fresh database, so runs do not see each other's rows.
		db, err := sqlite.Open(ctx, filepath.Join(dir, fmt.Sprintf("create-%d.db", w)), sqlite.WithDurability(durability))
		if err != nil {
			log.Fatal(err)
		}
		svc := core.New(core.Options{Store: db})
		sess, err := svc.CreateSession(ctx, belay.CreateSessionInput{ProjectPath: dir, Title: "bench"})
		if err != nil {
			log.Fatal(err)
		}
		rate := create(ctx, svc, sess.ID, state, *n, w)
		fmt.Printf("create: %d checkpoints with %d B agent state, %2d writer(s), durability %s: %6.0f checkpoints/s (target >= 10000/s)\n",
			*n, *stateSize, w, durability, rate)
		db.Close()
	}
	pprof.StopCPUProfile()

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
	small := makeState(256)
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
		fmt.Printf("%-14s %10s %10s %10s\n", f.name, pct(lat, 50), pct(lat, 99), lat[len(lat)-1].Round(time.Microsecond))
	}
}

func create(ctx context.Context, svc *core.Service, sessionID string, state json.RawMessage, n, workers int) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				_, err := svc.CreateCheckpoint(ctx, belay.CreateCheckpointInput{
					SessionID: sessionID, Summary: fmt.Sprintf("step %d", i), Type: belay.TypeAuto,
					Trigger: belay.TriggerPeriodic, AgentState: state, Tags: []string{"bench"},
				})
				if err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// makeState returns a JSON object of about size bytes, shaped like agent state.
func makeState(size int) json.RawMessage {
	m := map[string]any{"phase": "implementation", "step": 4, "messages": []string{}}
	msgs := []string{}
	for b, _ := json.Marshal(m); len(b) < size; b, _ = json.Marshal(m) {
		msgs = append(msgs, fmt.Sprintf("message %d: the agent edited internal/service/service.go", len(msgs)))
		m["messages"] = msgs
	}
	b, _ := json.Marshal(m)
	return b
}

func pct(lat []time.Duration, p int) time.Duration {
	return lat[(len(lat)-1)*p/100].Round(time.Microsecond)
}

// Command search measures belay's hybrid search on the embedded SQLite store
// with the built-in embedder, through the core service: how fast a project's
// checkpoints are embedded (reindex throughput) and how long a search takes
// (BM25 and vector rankings fused) with every checkpoint in one project:
//
//	go run ./bench/search -rows 100000 -queries 300
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/benchutil"
	"github.com/belayhq/belay/store/sqlite"
)

var (
	verbs      = strings.Fields("fixed added implemented refactored removed migrated tuned documented tested upgraded reverted optimised")
	components = strings.Fields("auth login billing invoices payments search cache database scheduler webhooks api frontend dashboard exporter importer queue worker notifications mobile sync")
	objects    = strings.Fields("middleware handler migration index query timeout retry pool token session cookie template schema endpoint client parser renderer flag test benchmark")
	details    = strings.Fields("crash leak race deadlock latency regression error panic overflow typo misconfiguration timeout flakiness")
)

// summary is a plausible checkpoint summary; one in 50 names a ticket.
func summary(r *rand.Rand, i int) (string, string, []string) {
	pick := func(words []string) string { return words[r.IntN(len(words))] }
	s := fmt.Sprintf("%s %s %s %s", pick(verbs), pick(components), pick(objects), pick(details))
	if i%50 == 0 {
		s += fmt.Sprintf(" (OC-%d)", 10000+i)
	}
	d := fmt.Sprintf("The %s %s had a %s; %s the %s and %s the %s %s.", pick(components), pick(objects), pick(details),
		pick(verbs), pick(objects), pick(verbs), pick(components), pick(objects))
	return s, d, []string{pick(components), pick(details)}
}

func main() {
	rows := flag.Int("rows", 100000, "checkpoints in the project")
	sessions := flag.Int("sessions", 100, "sessions they belong to")
	queries := flag.Int("queries", 300, "searches per scope")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the searches here")
	flag.Parse()
	admin := belay.WithActor(context.Background(), belay.Actor{UserID: "bench", Admin: true})
	owner := belay.WithActor(context.Background(), belay.Actor{UserID: "owner"})
	dir, err := os.MkdirTemp("", "belay-bench-search-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(admin, filepath.Join(dir, "belay.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	svc := core.New(core.Options{Store: db})
	if _, err := svc.CreateToken(admin, belay.CreateTokenInput{User: "owner"}); err != nil {
		log.Fatal(err)
	}
	project := filepath.Join(dir, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		log.Fatal(err)
	}
	var ids []string
	for i := 0; i < *sessions; i++ {
		s, err := svc.CreateSession(owner, belay.CreateSessionInput{ProjectPath: project, Title: fmt.Sprint("s", i)})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	start := time.Now()
	var wg sync.WaitGroup
	workers := 8
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(1, uint64(w)))
			for i := w; i < *rows; i += workers {
				s, d, tags := summary(r, i)
				in := belay.CreateCheckpointInput{SessionID: ids[i%len(ids)], Summary: s, Description: d, Tags: tags}
				if _, err := svc.CreateCheckpoint(owner, in); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("loaded %d checkpoints (%d sessions, one project) in %s\n", *rows, *sessions, time.Since(start).Round(time.Millisecond))

	embed := func(what string) {
		start := time.Now()
		if err := svc.IndexQueued(admin, nil); err != nil {
			log.Fatal(err)
		}
		d := time.Since(start)
		fmt.Printf("%-28s %6.0f checkpoints/s (%d in %s)\n", what, float64(*rows)/d.Seconds(), *rows, d.Round(time.Millisecond))
	}
	embed("embed the queue:")
	if _, err := svc.Reindex(admin, belay.ReindexInput{All: true}); err != nil {
		log.Fatal(err)
	}
	embed("reindex --all:")

	r := rand.New(rand.NewPCG(7, 7))
	var qs []string
	for i := 0; i < 50; i++ {
		s, _, _ := summary(r, 1)
		w := strings.Fields(s)
		switch i % 5 {
		case 0:
			qs = append(qs, fmt.Sprintf("OC-%d", 10000+50*r.IntN(*rows/50)))
		case 1:
			qs = append(qs, w[1]) // one common word
		case 2:
			qs = append(qs, "how did we fix the "+w[1]+" "+w[2]+" "+w[3])
		default:
			qs = append(qs, strings.Join(w[1:4], " "))
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
	fmt.Printf("%-28s %10s %10s %10s   (top 5 of %d checkpoints; target p50 <= 30ms)\n", "search", "p50", "p99", "max", *rows)
	for _, sc := range []struct {
		name string
		ctx  context.Context
		in   belay.SearchInput
	}{
		{"admin, all projects", admin, belay.SearchInput{}},
		{"owner, project filter", owner, belay.SearchInput{ProjectPath: project}},
		{"owner, project and tag", owner, belay.SearchInput{ProjectPath: project, Tags: []string{"billing"}}},
	} {
		var lat []time.Duration
		for i := 0; i < *queries; i++ {
			in := sc.in
			in.Query = qs[i%len(qs)]
			t := time.Now()
			res, err := svc.SearchCheckpoints(sc.ctx, in)
			if err != nil {
				log.Fatal(err)
			}
			lat = append(lat, time.Since(t))
			if len(res.Results) == 0 {
				log.Fatalf("%q found nothing", in.Query)
			}
		}
		slices.Sort(lat)
		fmt.Printf("%-28s %10s %10s %10s\n", sc.name, benchutil.Percentile(lat, 50), benchutil.Percentile(lat, 99), lat[len(lat)-1].Round(time.Microsecond))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("heap in use after the searches: %d MB (vectors held in memory: %d x 256 float32)\n", ms.HeapInuse>>20, *rows)
}

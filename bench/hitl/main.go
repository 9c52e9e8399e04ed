// Command hitl measures belay's human-in-the-loop path end to end: a real
// SQLite file, the HTTP API on loopback with token authentication, and the Go
// client on both sides.
//
//	go run ./bench/hitl -n 300 -decides 2000 -workers 8 -subscribers 1000
//
// It prints, as a table:
//   - decision → waiting agent: from just before a person's Decide is sent
//     until an agent blocked in WaitDecision (long poll) returns, and until a
//     subscriber of /v1/events?type=hitl.decided (SSE) receives it;
//   - sustained decides/s: N open requests decided by concurrent clients;
//   - SSE fan-out: time until each of many subscribers has one event.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/client"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/httpapi"
	"github.com/belayhq/belay/internal/benchutil"
	"github.com/belayhq/belay/store/sqlite"
)

func main() {
	n := flag.Int("n", 300, "requests for each latency measurement")
	decides := flag.Int("decides", 2000, "open requests to decide for the throughput run")
	workers := flag.Int("workers", 8, "concurrent deciding clients")
	subscribers := flag.Int("subscribers", 1000, "SSE subscribers for the fan-out run")
	rounds := flag.Int("rounds", 20, "events fanned out to all subscribers")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
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

	b := start()
	defer b.stop()
	fmt.Printf("belay HITL benchmark: SQLite %s, HTTP http://%s, GOMAXPROCS %d\n\n", b.dbPath, b.addr, runtime.GOMAXPROCS(0))
	fmt.Printf("%-44s %7s %10s %10s %10s   %s\n", "measurement", "n", "p50", "p99", "max", "target")

	row := func(name string, lat []time.Duration, target time.Duration) {
		slices.Sort(lat)
		verdict := ""
		if target > 0 {
			verdict = fmt.Sprintf("p99 <= %s: ", target)
			if benchutil.Percentile(lat, 99) <= target {
				verdict += "met"
			} else {
				verdict += "MISSED"
			}
		}
		fmt.Printf("%-44s %7d %10s %10s %10s   %s\n", name, len(lat), benchutil.Percentile(lat, 50), benchutil.Percentile(lat, 99), lat[len(lat)-1].Round(time.Microsecond), verdict)
	}
	row("decision → agent in WaitDecision (long poll)", b.longPoll(*n), 10*time.Millisecond)
	row("decision → SSE subscriber (hitl.decided)", b.sse(*n), 10*time.Millisecond)
	rate, lat := b.throughput(*decides, *workers)
	row(fmt.Sprintf("decide, %d clients (%.0f decides/s)", *workers, rate), lat, 0)
	each, all := b.fanout(*subscribers, *rounds)
	row(fmt.Sprintf("fan-out: one subscriber of %d", *subscribers), each, 0)
	row(fmt.Sprintf("fan-out: all %d subscribers", *subscribers), all, 0)
	fmt.Printf("\nwith %d idle SSE subscribers the process uses %.0f%% of one CPU\n", *subscribers, 100*b.idleCPU)
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bench is one database served over loopback, an agent and a person.
type bench struct {
	dir, dbPath, addr, url, token string
	db                            *sqlite.DB
	svc                           *core.Service
	srv                           *http.Server
	stopSweeper                   context.CancelFunc
	ctx                           context.Context // the agent acting on the service directly
	session                       string
	decider                       *client.Client
	idleCPU                       float64 // CPUs busy while subscribers wait for events

	mu       sync.Mutex
	arrivals map[string]chan struct{} // path → closed when a request for it reaches the handler
	streams  atomic.Int64             // event streams being served
}

func start() *bench {
	dir, err := os.MkdirTemp("", "belay-bench-hitl-")
	if err != nil {
		log.Fatal(err)
	}
	b := &bench{dir: dir, dbPath: filepath.Join(dir, "belay.db"), arrivals: map[string]chan struct{}{}}
	ctx := context.Background()
	if b.db, err = sqlite.Open(ctx, b.dbPath); err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.svc = core.New(core.Options{Store: b.db, Logger: logger})
	if b.token, err = b.svc.Bootstrap(ctx); err != nil {
		log.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{Service: b.svc, Logger: logger, Authenticate: b.svc.Authenticate}).Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	b.addr, b.url = ln.Addr().String(), "http://"+ln.Addr().String()
	b.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		if ch, ok := b.arrivals[r.URL.Path]; ok {
			close(ch)
			delete(b.arrivals, r.URL.Path)
		}
		b.mu.Unlock()
		if r.URL.Path == "/v1/events" {
			b.streams.Add(1)
			defer b.streams.Add(-1)
		}
		api.ServeHTTP(w, r)
	})}
	go b.srv.Serve(ln)
	sweepCtx, stop := context.WithCancel(ctx)
	b.stopSweeper = stop
	go b.svc.RunSweeper(sweepCtx) // as `belay serve` does

	b.ctx = belay.WithActor(ctx, belay.Actor{UserID: "agent"})
	sess, err := b.svc.CreateSession(belay.WithActor(ctx, belay.Actor{UserID: core.BootstrapUser}), belay.CreateSessionInput{Title: "bench"})
	if err != nil {
		log.Fatal(err)
	}
	b.session = sess.ID
	b.decider = b.newClient()
	return b
}

func (b *bench) stop() {
	b.stopSweeper()
	b.srv.Close()
	b.db.Close()
	os.RemoveAll(b.dir)
}

// newClient returns a client of the admin with its own connection pool.
func (b *bench) newClient() *client.Client {
	c, err := client.New(b.url, b.token)
	if err != nil {
		log.Fatal(err)
	}
	return c.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
}

// request opens one HITL request in the bench session.
func (b *bench) request() *belay.Checkpoint {
	cp, err := b.svc.CreateCheckpoint(b.ctx, belay.CreateCheckpointInput{SessionID: b.session, Summary: "may I?",
		HITL: &belay.HITLInput{Required: true, Timeout: &belay.TimeoutInput{Duration: 3600, DefaultAction: belay.ActionReject}}})
	if err != nil {
		log.Fatal(err)
	}
	return cp
}

func (b *bench) approve(c *client.Client, id string) {
	if _, err := c.Decide(context.Background(), belay.DecideInput{CheckpointID: id, Action: belay.ActionApprove, SelectedOption: "approve"}); err != nil {
		log.Fatal(err)
	}
}

// arrived returns a channel closed once a request for path reaches the server.
func (b *bench) arrived(path string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan struct{})
	b.arrivals[path] = ch
	return ch
}

// longPoll measures decision → agent blocked in WaitDecision.
func (b *bench) longPoll(n int) []time.Duration {
	agent := b.newClient()
	lat := make([]time.Duration, 0, n)
	for range n {
		cp := b.request()
		in := b.arrived("/v1/checkpoints/" + cp.ID + "/decision")
		returned := make(chan time.Time, 1)
		go func() {
			res, err := agent.WaitDecision(context.Background(), cp.ID, 30*time.Second)
			if err != nil || !res.Decided {
				log.Fatalf("WaitDecision: %+v, %v", res, err)
			}
			returned <- time.Now()
		}()
		<-in
		time.Sleep(2 * time.Millisecond) // let the waiter settle into its wait
		t0 := time.Now()
		b.approve(b.decider, cp.ID)
		lat = append(lat, (<-returned).Sub(t0))
	}
	return lat
}

// sse measures decision → subscriber of /v1/events?type=hitl.decided.
func (b *bench) sse(n int) []time.Duration {
	sub := b.newClient()
	got := make(chan string, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	after, err := b.db.LastEventSeq(ctx)
	if err != nil {
		log.Fatal(err)
	}
	go sub.Events(ctx, client.EventFilter{Types: []string{belay.EventHITLDecided}, After: after}, func(e belay.Event) error {
		got <- e.CheckpointID
		return nil
	})
	b.waitStreams(1)
	lat := make([]time.Duration, 0, n)
	for range n {
		cp := b.request()
		t0 := time.Now()
		b.approve(b.decider, cp.ID)
		if id := <-got; id != cp.ID {
			log.Fatalf("subscriber got %s, want %s", id, cp.ID)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// throughput opens n requests, then decides them with workers clients; it
// returns decides/s and each decide's latency.
func (b *bench) throughput(n, workers int) (float64, []time.Duration) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.request().ID
	}
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range workers {
		c := b.newClient()
		wg.Go(func() {
			for i := w; i < n; i += workers {
				t := time.Now()
				b.approve(c, ids[i])
				lats[w] = append(lats[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	rate := float64(n) / time.Since(t0).Seconds()
	return rate, slices.Concat(lats...)
}

// fanout connects subs subscribers to /v1/events?type=hitl.decided, then
// decides rounds requests one at a time. It returns each subscriber's
// latency per event, and per event the time until all had it.
func (b *bench) fanout(subs, rounds int) (each, all []time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	after, err := b.db.LastEventSeq(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// One connection per subscriber, as separate processes would have.
	tr := &http.Transport{MaxIdleConnsPerHost: subs}
	c, err := client.New(b.url, b.token)
	if err != nil {
		log.Fatal(err)
	}
	c.WithHTTPClient(&http.Client{Transport: tr})
	var mu sync.Mutex
	var received []time.Time
	var wg sync.WaitGroup
	for range subs {
		go c.Events(ctx, client.EventFilter{Types: []string{belay.EventHITLDecided}, After: after}, func(belay.Event) error {
			now := time.Now()
			mu.Lock()
			received = append(received, now)
			mu.Unlock()
			wg.Done()
			return nil
		})
	}
	b.waitStreams(int64(subs))
	time.Sleep(500 * time.Millisecond)
	idle := cpuTime()
	time.Sleep(2 * time.Second)
	b.idleCPU = (cpuTime() - idle).Seconds() / 2
	for range rounds {
		cp := b.request()
		mu.Lock()
		received = received[:0]
		mu.Unlock()
		wg.Add(subs)
		t0 := time.Now()
		b.approve(b.decider, cp.ID)
		wg.Wait()
		mu.Lock()
		last := t0
		for _, r := range received {
			each = append(each, r.Sub(t0))
			if r.After(last) {
				last = r
			}
		}
		mu.Unlock()
		all = append(all, last.Sub(t0))
	}
	return each, all
}

// waitStreams waits until at least n event streams are being served.
func (b *bench) waitStreams(n int64) {
	deadline := time.Now().Add(60 * time.Second)
	for b.streams.Load() < n {
		if time.Now().After(deadline) {
			log.Fatalf("only %d of %d event streams connected", b.streams.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

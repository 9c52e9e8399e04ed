// Command trpc measures the cost of the tRPC layer: the same calls through
// @trpc/client and through /v1 on one `belay serve`, and SSE fan-out of
// stream.hitlRequired. It needs node and `npm ci` in testdata/node.
//
//	go run ./bench/trpc -n 500 -subscribers 1000
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

func main() {
	n := flag.Int("n", 500, "calls of each kind to time")
	subscribers := flag.Int("subscribers", 1000, "SSE subscribers for the fan-out")
	flag.Parse()
	if err := run(*n, *subscribers); err != nil {
		log.Fatal(err)
	}
}

var (
	urlRE   = regexp.MustCompile(`serving on (http://\S+)`)
	tokenRE = regexp.MustCompile(`belay_[A-Za-z0-9_-]+`)
)

func run(n, subscribers int) error {
	dir, err := os.MkdirTemp("", "belay-bench-trpc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "belay")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/belay").CombinedOutput(); err != nil {
		return fmt.Errorf("build belay (run from the module root): %v\n%s", err, out)
	}
	srv := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	srv.Env = append(os.Environ(), "BELAY_DATA_DIR="+filepath.Join(dir, "data"), "RATE_LIMIT_CHECKPOINT_SAVE=0")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	}()
	var url, token string
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(30 * time.Second)
	for (url == "" || token == "") && time.Now().Before(deadline) && sc.Scan() {
		line := sc.Text()
		if m := urlRE.FindStringSubmatch(line); m != nil {
			url = m[1]
		}
		if t := tokenRE.FindString(line); t != "" && token == "" {
			token = t
		}
	}
	if url == "" || token == "" {
		return fmt.Errorf("belay serve did not start")
	}
	// The script lives beside the npm packages it imports.
	node := exec.Command("node", "bench_trpc.mjs", url, token, fmt.Sprint(n), fmt.Sprint(subscribers))
	node.Dir = filepath.Join("testdata", "node")
	node.Stdout, node.Stderr = os.Stdout, os.Stderr
	return node.Run()
}

// Command mcp measures checkpoint_save end to end through MCP over stdio, as
// a coding agent sees it: the real `belay mcp` process on a fresh data
// directory, the official Go SDK as the client, a snapshot of a small
// project on every save.
//
//	go run ./bench/mcp -n 300 -files 200
//
// It prints the latency of one save (p50, p99, max) and saves per second.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	n := flag.Int("n", 300, "saves to time")
	files := flag.Int("files", 200, "files in the project")
	flag.Parse()
	if err := run(*n, *files); err != nil {
		log.Fatal(err)
	}
}

func run(n, files int) error {
	dir, err := os.MkdirTemp("", "belay-bench-mcp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "belay")
	build := exec.Command("go", "build", "-o", bin, "./cmd/belay")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build belay (run from the module root): %w", err)
	}
	project := filepath.Join(dir, "project")
	for i := range files {
		p := filepath.Join(project, fmt.Sprintf("pkg%d", i%10), fmt.Sprintf("f%d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "package p\n// file %d\n", i), 0o644); err != nil {
			return err
		}
	}
	cmd := exec.Command(bin, "mcp")
	// No rate limit applies to the local database.
	cmd.Env = append(os.Environ(), "BELAY_DATA_DIR="+filepath.Join(dir, "data"))
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		// Each save sees one changed file, as after an agent's edit.
		p := filepath.Join(project, "pkg0", "f0.go")
		if err := os.WriteFile(p, fmt.Appendf(nil, "package p\n// edit %d\n", i), 0o644); err != nil {
			return err
		}
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "checkpoint_save",
			Arguments: map[string]any{"summary": fmt.Sprintf("step %d", i), "project_path": project, "tags": []string{"bench"}}})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("save %d: %s", i, res.Content[0].(*mcp.TextContent).Text)
		}
		lat = append(lat, time.Since(t0))
	}
	total := time.Since(start)
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("checkpoint_save through MCP stdio (snapshot of %d files, 1 changed), %d saves\n", files, n)
	fmt.Printf("  p50 %s   p99 %s   max %s   %.0f saves/s\n", q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond),
		lat[len(lat)-1].Round(10*time.Microsecond), float64(n)/total.Seconds())
	return nil
}

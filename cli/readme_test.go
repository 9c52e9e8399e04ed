package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testtree"
)

// readmeBlocks returns the fenced blocks of README.md in the given language,
// in order.
func readmeBlocks(t *testing.T, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for line := range strings.Lines(string(data)) {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```"+lang:
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, ""))
		case in:
			cur = append(cur, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("README.md has no %s blocks", lang)
	}
	return blocks
}

// readmeDefaultURL is the server address README's examples use; the test
// runs its server on a free port and puts that one in its place.
const readmeDefaultURL = "http://127.0.0.1:7420"

// readmeSetup are README shell lines the test does itself instead of
// running them: building or starting belay and running the tests. Each must
// be in README, so the list cannot outlive what README says.
var readmeSetup = []string{
	"go run ./cmd/belay serve", // the test starts the built binary instead
	"go test ./...",            // this is a test already
	"go build -o belay ./cmd/belay && export PATH=$PWD:$PATH", // the built binary is on PATH
}

// TestREADMEWalkthrough runs README's shell blocks (the Quickstart and the
// human-in-the-loop walkthrough) with the real binary, in a fresh home
// directory with a server running, and its Go client example against the same
// server: a line that stops working fails here.
func TestREADMEWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs README's examples as separate processes")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("README's walkthrough uses curl")
	}
	bin := belayBinary(t)
	home := t.TempDir()
	project := filepath.Join(home, "my-project")
	testtree.Write(t, project, map[string]string{"main.go": "package main\n", "README.md": "# my project\n", "go.mod": "module example\n"})
	env := []string{"HOME=" + home, "PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"), "LANG=C"}
	_, url, token, _, _ := startServer(t, bin, env)
	env = append(env, "BELAY_TOKEN="+token)

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	used := map[string]bool{}
	for _, block := range readmeBlocks(t, "sh") {
		for line := range strings.Lines(block) {
			cmd, _, _ := strings.Cut(line, "  #")
			if i := slices.Index(readmeSetup, strings.TrimSpace(cmd)); i >= 0 {
				used[readmeSetup[i]] = true
				script.WriteString("# (done by the test) " + line)
				continue
			}
			script.WriteString(strings.ReplaceAll(line, readmeDefaultURL, url))
		}
	}
	for _, s := range readmeSetup {
		if !used[s] {
			t.Errorf("README no longer says %q: update readmeSetup", s)
		}
	}
	run := exec.Command("bash", "-x", "-c", script.String())
	run.Dir = home
	run.Env = env
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("README's walkthrough failed: %v\nscript:\n%s\noutput:\n%s", err, script.String(), out)
	}

	// The walkthrough ends with the rollback undone and the request approved.
	got := testtree.Read(t, project)
	if got["main.go"] != "broken\n" || got["README.md"] != "" || got["junk.txt"] != "" || !hasKey(got, "junk.txt") || hasKey(got, "README.md") {
		t.Errorf("project after the walkthrough: %q", got)
	}
	belayJSON := func(v any, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--json"}, args...)...)
		cmd.Dir, cmd.Env = project, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("belay %s: %v\n%s", args, err, out)
		}
		if err := json.Unmarshal(out, v); err != nil {
			t.Fatalf("belay %s: %v\n%s", args, err, out)
		}
	}
	var asked belay.Checkpoint
	belayJSON(&asked, "show", "3")
	if asked.Decision == nil || asked.Decision.Action != belay.ActionApprove || asked.Decision.SelectedOption != "pg" {
		t.Errorf("checkpoint #3 after the walkthrough: %+v", asked)
	}

	t.Run("Go client", func(t *testing.T) {
		readmeGoExample(t, bin, project, url, token, env)
	})
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// readmeProgramCompiles builds a README Go block that is a whole program, as
// a package of this module.
func readmeProgramCompiles(t *testing.T, src string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "internal", "readmeprogram", "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", filepath.Join(dir, "program"), "./internal/readmeprogram")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("a Go program in README does not compile: %v\n%s\n%s", err, out, src)
	}
}

// readmeGoExample compiles README's Go block as a program that calls its
// function, runs it against the server and answers the request it makes.
func readmeGoExample(t *testing.T, bin, project, url, token string, env []string) {
	// A block that is a whole program (the graph example) is compiled; the
	// one that is a function (the Go client) is run too.
	var blocks []string
	for _, b := range readmeBlocks(t, "go") {
		if strings.HasPrefix(b, "package main") {
			readmeProgramCompiles(t, b)
			continue
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d go blocks that are not whole programs, want 1", len(blocks))
	}
	dir := t.TempDir()
	src := "package main\n\n" + strings.ReplaceAll(blocks[0], readmeDefaultURL, url) + `
func main() {
	d, err := askToMerge(context.Background(), os.Args[1])
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString(string(d.Action) + " " + d.SelectedOption + "\n")
}
`
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// The program is compiled as if it were a package of this module, so it
	// uses this checkout of belay.
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "internal", "readmeexample", "main.go"): file}})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", filepath.Join(dir, "example"), "./internal/readmeexample")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("README's Go example does not compile: %v\n%s\n%s", err, out, src)
	}

	agent := exec.Command(filepath.Join(dir, "example"), project)
	agent.Env = append(slices.Clone(env), "BELAY_TOKEN="+token)
	var stdout, stderr bytes.Buffer
	agent.Stdout, agent.Stderr = &stdout, &stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	t.Cleanup(func() {
		agent.Process.Kill()
		<-done
	})

	// A person answers the request once it is pending.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command(bin, "--json", "pending")
		cmd.Dir, cmd.Env = project, env
		out, err := cmd.Output()
		var pending []belay.PendingHITL
		if err == nil && json.Unmarshal(out, &pending) != nil {
			var page struct{ Items []belay.PendingHITL }
			err = json.Unmarshal(out, &page)
			pending = page.Items
		}
		if err == nil && len(pending) > 0 {
			decide := exec.Command(bin, "decide", pending[0].Checkpoint.ID, "--option", "approve")
			decide.Dir, decide.Env = project, env
			if out, err := decide.CombinedOutput(); err != nil {
				t.Fatalf("decide: %v\n%s", err, out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Go example's request never became pending (pending: %v %s); its stderr: %s", err, out, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil || strings.TrimSpace(stdout.String()) != "approve approve" {
			t.Errorf("README's Go example: %v, printed %q, stderr %q", err, stdout.String(), stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("README's Go example did not return after the decision; stderr %s", stderr.String())
	}
}

package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeTimeout bounds one run of a node client: a hang fails the test.
const nodeTimeout = 2 * time.Minute

// nodeClients returns the directory of the npm clients the tests drive, or
// skips when Node or its installed packages are missing — except in CI,
// where .ci/run installs them and their absence is a failure.
func nodeClients(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk"))
	if nodeErr != nil || modErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node or the npm packages are missing (run npm ci in testdata/node): %v %v", nodeErr, modErr)
		}
		t.Skip("node or testdata/node/node_modules missing; run npm ci in testdata/node")
	}
	return dir
}

func runNode(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"mcp_client.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node mcp_client.mjs %s: %v\n%s", strings.Join(args[:1], " "), err, out)
	}
	if !strings.Contains(string(out), `"check":"done"`) {
		t.Fatalf("the client did not finish:\n%s", out)
	}
}

// TestMCPWithTheOfficialTypeScriptClient drives `belay mcp` (stdio) and /mcp
// on `belay serve` (streamable HTTP) with @modelcontextprotocol/sdk from npm.
func TestMCPWithTheOfficialTypeScriptClient(t *testing.T) {
	dir := nodeClients(t)
	bin := belayBinary(t)
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("stdio", func(t *testing.T) {
		env := append(os.Environ(), "BELAY_DATA_DIR="+t.TempDir(), "HOME="+t.TempDir())
		runNode(t, dir, env, "stdio", bin, project)
	})
	t.Run("streamable HTTP with a rate limit", func(t *testing.T) {
		env := []string{"BELAY_DATA_DIR=" + t.TempDir(), "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "RATE_LIMIT_CHECKPOINT_SAVE=2"}
		srv, url, token, _, exited := startServer(t, bin, env)
		runNode(t, dir, append(os.Environ(), "EXPECT_RATE_LIMIT=1"), "http", url, token, project)
		srv.Process.Signal(os.Interrupt)
		<-exited
	})
}

// TestTRPCWithTheRealTRPCClient drives /trpc and /trpc-superjson on `belay
// serve` with @trpc/client from npm over every link.
func TestTRPCWithTheRealTRPCClient(t *testing.T) {
	dir := nodeClients(t)
	bin := belayBinary(t)
	project := t.TempDir()
	env := []string{"BELAY_DATA_DIR=" + t.TempDir(), "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	srv, url, token, _, exited := startServer(t, bin, env)
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "trpc_client.mjs", url, token, project)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"check":"done"`) {
		t.Fatalf("node trpc_client.mjs: %v\n%s", err, out)
	}
	srv.Process.Signal(os.Interrupt)
	<-exited
}

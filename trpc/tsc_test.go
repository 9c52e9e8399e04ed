package trpc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTypeScriptClientTypeChecks runs tsc on seed 000's snippets typed
// against the committed AppRouter, so a type that drifts fails the suite.
func TestTypeScriptClientTypeChecks(t *testing.T) {
	dir := filepath.Join("..", "clients", "trpc")
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("typescript is not installed in clients/trpc (npm ci there): %v", err)
		}
		t.Skip("run npm ci in clients/trpc to type-check the TypeScript client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join("node_modules", ".bin", "tsc"), "--noEmit", "-p", ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc --noEmit: %v\n%s", err, out)
	}
}

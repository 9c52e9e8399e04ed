package trpc_test

import (
	"os"
	"testing"

	"github.com/belayhq/belay/trpc"
)

// TestTypeScriptIsCurrent fails when the committed TypeScript definitions
// differ from the Go router's: run go generate ./trpc.
func TestTypeScriptIsCurrent(t *testing.T) {
	committed, err := os.ReadFile("../clients/trpc/src/index.ts")
	if err != nil {
		t.Fatal(err)
	}
	if string(committed) != trpc.TypeScript() {
		t.Fatal("clients/trpc/src/index.ts is stale: run go generate ./trpc")
	}
}

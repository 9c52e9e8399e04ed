// Command gents writes the TypeScript definitions of belay's tRPC router
// (trpc.TypeScript) to the file named by its argument.
package main

import (
	"log"
	"os"

	"github.com/belayhq/belay/trpc"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: gents FILE")
	}
	if err := os.WriteFile(os.Args[1], []byte(trpc.TypeScript()), 0o644); err != nil {
		log.Fatal(err)
	}
}

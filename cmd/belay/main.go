// Command belay is checkpoints, rollback and human-in-the-loop for AI agents.
// See `belay --help`.
package main

import (
	"github.com/belayhq/belay/cli"
	"github.com/belayhq/belay/cmd/belay/wire"
)

func main() { cli.Main(wire.Backend()) }

// Command belay is checkpoints, rollback and human-in-the-loop for AI agents.
// See `belay --help`.
package main

import "github.com/belayhq/belay/cli"

func main() { cli.Main() }

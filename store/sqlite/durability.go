package sqlite

import (
	"fmt"
	"strings"
)

// Durability says what a commit waits for before Update returns.
type Durability int

const (
	// Full, the default, waits until the commit is on disk: a write Update
	// acknowledged survives a power loss or an OS crash. Update syncs the
	// write-ahead log itself after the commit (see walSync): one sync covers
	// every write committed before it began, and the writer connection runs
	// the next transactions while it runs.
	Full Durability = iota
	// Relaxed syncs the write-ahead log only when it is checkpointed into the
	// database file. It risks the last transactions acknowledged before a
	// power loss or an OS crash (never those before a crash of the process
	// alone); it never corrupts the database.
	Relaxed
)

// String returns the mode's name: full or relaxed.
func (d Durability) String() string {
	switch d {
	case Full:
		return "full"
	case Relaxed:
		return "relaxed"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// Set parses a mode's name, in any case; it makes Durability a command-line
// flag value.
func (d *Durability) Set(name string) error {
	switch strings.ToLower(name) {
	case "full":
		*d = Full
	case "relaxed":
		*d = Relaxed
	default:
		return fmt.Errorf("durability must be full or relaxed, got %q", name)
	}
	return nil
}

// Type names the values in command-line help.
func (d *Durability) Type() string { return "full|relaxed" }

// valid reports whether d is one of the modes.
func (d Durability) valid() bool { return d == Full || d == Relaxed }

// An Option changes how Open opens a database.
type Option func(*options)

type options struct {
	durability Durability
}

// WithDurability sets what a commit waits for; Full when not given.
func WithDurability(d Durability) Option {
	return func(o *options) { o.durability = d }
}

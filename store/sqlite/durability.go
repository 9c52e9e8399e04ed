package sqlite

import (
	"fmt"
	"strings"
)

// Durability says what a commit waits for before Update returns.
type Durability int

const (
	// Full, the default, waits until the commit is on disk (SQLite
	// synchronous=FULL): a write Update acknowledged survives a power loss or
	// an OS crash. Group commit shares one sync among the writes committed
	// together.
	Full Durability = iota
	// Relaxed (synchronous=NORMAL) syncs the write-ahead log only when it is
	// checkpointed into the database file. It risks the last transactions
	// acknowledged before a power loss or an OS crash (never those before a
	// crash of the process alone); it never corrupts the database.
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

// synchronous returns the value of SQLite's synchronous pragma for the mode,
// as PRAGMA synchronous reads it back.
func (d Durability) synchronous() (int, error) {
	switch d {
	case Full:
		return 2, nil
	case Relaxed:
		return 1, nil
	}
	return 0, fmt.Errorf("sqlite: unknown durability %s", d)
}

// An Option changes how Open opens a database.
type Option func(*options)

type options struct {
	durability Durability
}

// WithDurability sets what a commit waits for; Full when not given.
func WithDurability(d Durability) Option {
	return func(o *options) { o.durability = d }
}

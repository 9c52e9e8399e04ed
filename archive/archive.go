// Package archive is the file format of a session export: a gzipped tar of
// manifest.json, one cp-NN-<name>.json per checkpoint, rollback-history.json
// and workspace.bundle, the git bundle of the checkpoints' snapshots (seed
// 004's layout plus the snapshots).
//
// Write writes an archive from what it is handed; Read reads an untrusted
// one within limits and checks its records against each other. The package
// knows nothing of stores or git: the bundle's bytes pass through it.
package archive

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

// Names inside an archive, and the format it declares.
const (
	ManifestFile  = "manifest.json"
	RollbacksFile = "rollback-history.json"
	BundleFile    = "workspace.bundle"
	Format        = "belay-session"
	Version       = 1
)

// Manifest is manifest.json: seed 004's manifest, with the session.
type Manifest struct {
	Format            string          `json:"format"`
	Version           int             `json:"version"`
	SessionID         string          `json:"session_id"`
	Topic             string          `json:"topic"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	ExportedAt        time.Time       `json:"exported_at"`
	Checkpoints       []ManifestEntry `json:"checkpoints"`
	CurrentCheckpoint string          `json:"current_checkpoint"`
	// RollbackHistory lists the rollbacks' ids; rollback-history.json holds them.
	RollbackHistory []string       `json:"rollback_history"`
	Session         *belay.Session `json:"session"`
	// Bundle names the git bundle of the snapshots, when there are any.
	Bundle string `json:"bundle,omitempty"`
}

// ManifestEntry lists one checkpoint and the file that holds it.
type ManifestEntry struct {
	// ID is seed 004's checkpoint id, cp-NN-<name>; File is ID + ".json".
	ID           string `json:"id"`
	CheckpointID string `json:"checkpoint_id"`
	Step         int64  `json:"step"`
	File         string `json:"file"`
	Valid        bool   `json:"valid"`
	Checksum     string `json:"checksum"`
}

// Contents is what an archive carries.
type Contents struct {
	Session *belay.Session
	// Checkpoints are the session's checkpoints in seq order.
	Checkpoints []*belay.Checkpoint
	// Rollbacks are the session's rollbacks, oldest first.
	Rollbacks []*belay.Rollback
	// Deleted are the checkpoint ids the session's head, the checkpoints'
	// parents and the rollbacks name that the archive lacks: checkpoints
	// deleted before the export, as the session's own database holds them.
	// An importer makes sure none names a checkpoint it has.
	Deleted    []string
	ExportedAt time.Time
}

var slugInvalid = regexp.MustCompile(`[^a-z0-9]+`)

// entryID is seed 004's checkpoint id: cp-NN-<name>.
func entryID(cp *belay.Checkpoint) string {
	slug := strings.Trim(slugInvalid.ReplaceAllString(strings.ToLower(cp.Name), "-"), "-")
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-")
	}
	if slug == "" {
		return fmt.Sprintf("cp-%02d", cp.Seq)
	}
	return fmt.Sprintf("cp-%02d-%s", cp.Seq, slug)
}

// Invalid returns the VALIDATION_ERROR of an archive that is not a belay
// export, as Read returns it; for a caller checking the bundle it is handed.
func Invalid(format string, args ...any) *belay.Error {
	return belay.Invalid("archive", "not a belay export: "+format, args...)
}

package core

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/belayhq/belay"
)

// The record a snapshot commit carries: seed 004's message plus trailers
// from which Validate rebuilds a checkpoint's row from git alone.

// commitRecord is the checkpoint as carried by its snapshot commit (trailer
// Belay-Record): enough to rebuild the checkpoint's row from git alone. The
// snapshot commit, the checksum and — when the commit has a parent to compare
// with — the file changes are derived, so they are left out.
type commitRecord struct {
	Version      int               `json:"v"`
	Checkpoint   *belay.Checkpoint `json:"checkpoint"`
	ParentCommit string            `json:"parentCommit,omitempty"`
}

const (
	recordVersion  = 1
	recordTrailer  = "Belay-Record: "
	maxFilesListed = 200
)

// commitMessage is seed 004's checkpoint commit message plus trailers
// carrying cp's record. files is the list of changed files, when known.
func commitMessage(cp *belay.Checkpoint, parentCommit string, files *belay.FileChanges) (string, error) {
	rec := *cp
	rec.WorkspaceRef, rec.Checksum, rec.Files = "", "", nil
	rec.Decision, rec.TimeoutFired = nil, false
	if parentCommit == "" {
		rec.Files = files
	}
	data, err := json.Marshal(commitRecord{Version: recordVersion, Checkpoint: &rec, ParentCommit: parentCommit})
	if err != nil {
		return "", fmt.Errorf("encode checkpoint record: %w", err)
	}
	var b strings.Builder
	name := cp.Name
	if name == "" {
		name = cp.Summary
	}
	fmt.Fprintf(&b, "checkpoint: step-%d - %s\n\n", cp.Seq, belay.OneLine(name, 72))
	fmt.Fprintf(&b, "Session: %s\nCheckpoint: %s\n", cp.SessionID, cp.ID)
	if files != nil {
		all := slices.Concat(files.Created, files.Modified, files.Deleted)
		slices.Sort(all)
		if len(all) > 0 {
			b.WriteString("\nFiles changed:\n")
			for _, p := range all[:min(len(all), maxFilesListed)] {
				fmt.Fprintf(&b, "- %s\n", quotePath(p))
			}
			if len(all) > maxFilesListed {
				fmt.Fprintf(&b, "- … and %d more\n", len(all)-maxFilesListed)
			}
		}
	}
	fmt.Fprintf(&b, "\nBelay-Session: %s\nBelay-Seq: %d\n%s%s\n", cp.SessionID, cp.Seq, recordTrailer, base64.StdEncoding.EncodeToString(data))
	return b.String(), nil
}

// quotePath quotes a path that would not read as one line as is.
func quotePath(p string) string {
	if strings.IndexFunc(p, unicode.IsControl) >= 0 || strings.TrimSpace(p) != p || strings.HasPrefix(p, `"`) {
		return strconv.Quote(p)
	}
	return p
}

// maxRecordBytes bounds a decoded record: three JSON fields of
// belay.MaxStateBytes and the rest.
const maxRecordBytes = 3*belay.MaxStateBytes + 1<<20

// parseRecord reads the record trailer of a snapshot commit message.
func parseRecord(msg string) (*commitRecord, error) {
	i := strings.LastIndex(msg, "\n"+recordTrailer)
	if i < 0 {
		return nil, errors.New("the commit has no " + strings.TrimSpace(recordTrailer) + " trailer")
	}
	enc, _, _ := strings.Cut(msg[i+1+len(recordTrailer):], "\n")
	if base64.StdEncoding.DecodedLen(len(enc)) > maxRecordBytes {
		return nil, errors.New("the checkpoint record is too large")
	}
	data, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("the checkpoint record is not base64: %w", err)
	}
	var rec commitRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("the checkpoint record is not valid JSON: %w", err)
	}
	if rec.Version != recordVersion || rec.Checkpoint == nil {
		return nil, fmt.Errorf("unknown checkpoint record version %d", rec.Version)
	}
	if !belay.IsUUID(rec.Checkpoint.ID) || !belay.IsUUID(rec.Checkpoint.SessionID) {
		return nil, errors.New("the checkpoint record has no valid ids")
	}
	return &rec, nil
}

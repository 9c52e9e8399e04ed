package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"time"

	"github.com/belayhq/belay"
)

// Write writes c to w as an archive: manifest.json, the checkpoints in the
// order given, rollback-history.json and, when bundle names a file, that
// file as workspace.bundle. It writes what it is handed; checking the
// checkpoints and their snapshots is the caller's part.
func Write(w io.Writer, c *Contents, bundle string) error {
	sess := c.Session
	m := Manifest{Format: Format, Version: Version, SessionID: sess.ID, Topic: sess.Title,
		CreatedAt: sess.CreatedAt, UpdatedAt: sess.UpdatedAt, ExportedAt: c.ExportedAt, Session: sess,
		Checkpoints: []ManifestEntry{}, RollbackHistory: []string{}}
	for _, cp := range c.Checkpoints {
		id := entryID(cp)
		m.Checkpoints = append(m.Checkpoints, ManifestEntry{ID: id, CheckpointID: cp.ID, Step: cp.Seq,
			File: id + ".json", Valid: true, Checksum: cp.Checksum})
		if cp.ID == sess.HeadCheckpointID {
			m.CurrentCheckpoint = id
		}
	}
	rollbacks := c.Rollbacks
	if rollbacks == nil {
		rollbacks = []*belay.Rollback{}
	}
	for _, rb := range rollbacks {
		m.RollbackHistory = append(m.RollbackHistory, rb.ID)
	}
	if bundle != "" {
		m.Bundle = BundleFile
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name string, v any) error {
		// Compact: indenting would grow a deeply nested state with the
		// square of its depth, past what an import reads back.
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return writeEntry(tw, name, int64(len(data)), bytes.NewReader(data), c.ExportedAt)
	}
	if err := add(ManifestFile, m); err != nil {
		return err
	}
	for i, cp := range c.Checkpoints {
		if err := add(m.Checkpoints[i].File, cp); err != nil {
			return err
		}
	}
	if err := add(RollbacksFile, rollbacks); err != nil {
		return err
	}
	if bundle != "" {
		f, err := os.Open(bundle)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if err := writeEntry(tw, BundleFile, fi.Size(), f, c.ExportedAt); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeEntry(tw *tar.Writer, name string, size int64, r io.Reader, at time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, ModTime: at, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}

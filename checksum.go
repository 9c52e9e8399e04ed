package belay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// checksumFields is the canonical encoding of a checkpoint: its immutable
// fields in a fixed order, JSON values compacted, times in UTC. The decision
// and timeout bookkeeping change after creation and are not covered.
type checksumFields struct {
	ID           string            `json:"id"`
	SessionID    string            `json:"sessionId"`
	Seq          int64             `json:"seq"`
	Name         string            `json:"name"`
	Type         CheckpointType    `json:"type"`
	Trigger      Trigger           `json:"trigger"`
	Summary      string            `json:"summary"`
	Description  string            `json:"description"`
	ProjectPath  string            `json:"projectPath"`
	WorkspaceRef string            `json:"workspaceRef"`
	Files        *FileChanges      `json:"files"`
	AgentState   json.RawMessage   `json:"agentState"`
	Outputs      json.RawMessage   `json:"outputs"`
	Metadata     json.RawMessage   `json:"metadata"`
	Context      map[string]string `json:"context"`
	Tags         []string          `json:"tags"`
	Phase        string            `json:"phase"`
	Step         int               `json:"step"`
	ParentID     string            `json:"parentId"`
	HITLRequired bool              `json:"hitlRequired"`
	HITL         *HITLRequest      `json:"hitl"`
	CreatedBy    string            `json:"createdBy"`
	CreatedAt    string            `json:"createdAt"`
	ExpiresAt    string            `json:"expiresAt"`
}

func canonicalTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// ComputeChecksum returns "sha256:" and the hex digest of the checkpoint's
// canonical encoding. It fails when agent state, outputs or metadata is not
// JSON that compacting can make canonical (non-nil and empty, or invalid with
// whitespace or HTML characters); other invalid JSON hashes as it is, which
// no stored checkpoint matches, since creation validates it.
func (c *Checkpoint) ComputeChecksum() (string, error) {
	hitl := c.HITL
	if hitl != nil && hitl.Timeout != nil {
		h, to := *hitl, *hitl.Timeout
		to.ExpiresAt = to.ExpiresAt.UTC()
		h.Timeout = &to
		hitl = &h
	}
	// The JSON documents, the largest fields by far, are left out of the
	// marshalling and hashed in their place: json.Marshal would scan each
	// again to compact it, and they are compact already.
	f := checksumFields{
		ID: c.ID, SessionID: c.SessionID, Seq: c.Seq, Name: c.Name, Type: c.Type,
		Trigger: c.Trigger, Summary: c.Summary, Description: c.Description,
		ProjectPath: c.ProjectPath, WorkspaceRef: c.WorkspaceRef, Files: c.Files,
		Context: c.Context, Tags: c.Tags, Phase: c.Phase, Step: c.Step,
		ParentID: c.ParentID, HITLRequired: c.HITLRequired, HITL: hitl,
		CreatedBy: c.CreatedBy, CreatedAt: canonicalTime(c.CreatedAt),
	}
	if c.ExpiresAt != nil {
		f.ExpiresAt = canonicalTime(*c.ExpiresAt)
	}
	b, err := json.Marshal(&f)
	if err != nil {
		return "", err
	}
	// The slots are the first of their kind: a string before them has its
	// quotes escaped, and the files' keys are fixed.
	i := bytes.Index(b, documentSlots)
	if i < 0 {
		return "", fmt.Errorf("checksum: no place for the JSON documents in %.80q", b)
	}
	h := sha256.New()
	h.Write(b[:i])
	for j, doc := range []json.RawMessage{c.AgentState, c.Outputs, c.Metadata} {
		h.Write(documentKeys[j])
		if err := writeCanonical(h, doc); err != nil {
			return "", err
		}
	}
	h.Write(b[i+len(documentSlots)-1:])
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// documentSlots is how json.Marshal writes checksumFields' JSON documents
// when they are nil, up to the comma after them; documentKeys are their keys.
var (
	documentSlots = []byte(`,"agentState":null,"outputs":null,"metadata":null,`)
	documentKeys  = [][]byte{[]byte(`,"agentState":`), []byte(`,"outputs":`), []byte(`,"metadata":`)}
)

// writeCanonical writes doc as json.Marshal writes a json.RawMessage:
// compacted, with <, >, & and U+2028/U+2029 escaped, "null" when nil. A
// document without whitespace outside strings and without those characters
// is written as it is, with no second scan.
func writeCanonical(w io.Writer, doc json.RawMessage) error {
	if doc == nil {
		_, err := w.Write([]byte("null"))
		return err
	}
	if canonical(doc) {
		_, err := w.Write(doc)
		return err
	}
	var compacted, escaped bytes.Buffer
	if err := json.Compact(&compacted, doc); err != nil {
		return err
	}
	json.HTMLEscape(&escaped, compacted.Bytes())
	_, err := escaped.WriteTo(w)
	return err
}

// canonical reports whether doc is non-empty and has neither whitespace
// outside its strings nor a character json.Marshal escapes (<, >, &, and
// the first byte of U+2028 and U+2029).
func canonical(doc []byte) bool { return len(doc) > 0 && compactScan(doc, true) }

// IsCompactJSON reports whether doc has no whitespace outside its strings:
// json.Compact would return valid JSON doc as it is.
func IsCompactJSON(doc []byte) bool { return compactScan(doc, false) }

// compactScan reports whether doc has no whitespace outside its strings and,
// with html, no byte of a character json.Marshal escapes. Agent state is
// mostly string content, which it skips with bytes.IndexByte.
func compactScan(doc []byte, html bool) bool {
	if html {
		for _, c := range []byte{'<', '>', '&', 0xE2} {
			if bytes.IndexByte(doc, c) >= 0 {
				return false
			}
		}
	}
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			return false
		case '"':
			i = stringEnd(doc, i+1)
			if i < 0 {
				return true // the rest is inside an unterminated string
			}
		}
	}
	return true
}

// stringEnd returns the index of the quote that ends the string whose
// content begins at from, or -1: the first quote after an even number of
// backslashes (each pair is one escaped backslash).
func stringEnd(doc []byte, from int) int {
	for j := from; ; {
		k := bytes.IndexByte(doc[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for q-1-n >= from && doc[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q
		}
		j = q + 1
	}
}

// VerifyChecksum returns CHECKPOINT_CORRUPTED when the stored checksum does not
// match the checkpoint's content, or its state could not be read (StateErr).
func (c *Checkpoint) VerifyChecksum() error {
	if c.StateErr != nil {
		return c.StateErr
	}
	sum, err := c.ComputeChecksum()
	if err != nil || sum != c.Checksum {
		return &Error{Code: CodeCheckpointCorrupt,
			Message: "checkpoint " + c.ID + " does not match its checksum; run `belay validate` to see how to recover",
			Details: map[string]any{"id": c.ID, "seq": c.Seq, "sessionId": c.SessionID}}
	}
	return nil
}

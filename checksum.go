package belay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
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
	f := c.checksumFields()
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
		canon, err := canonicalDocument(doc)
		if err != nil {
			return "", err
		}
		h.Write(documentKeys[j])
		h.Write(canon)
	}
	h.Write(b[i+len(documentSlots)-1:])
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// checksumFields returns what the checksum covers but the JSON documents,
// the largest fields by far, which are hashed in their place: json.Marshal
// would scan each again to compact it, and they are compact already.
func (c *Checkpoint) checksumFields() checksumFields {
	hitl := c.HITL
	if hitl != nil && hitl.Timeout != nil {
		h, to := *hitl, *hitl.Timeout
		to.ExpiresAt = to.ExpiresAt.UTC()
		h.Timeout = &to
		hitl = &h
	}
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
	return f
}

// PreparedChecksum is a checkpoint's canonical encoding but for the fields
// its session decides (SessionID, Seq, ProjectPath, ParentID), prepared before
// the save's transaction so that the transaction only hashes: the marshalling
// and the scan of the JSON documents cost several times what the hash does.
type PreparedChecksum struct {
	// parts are the encoding between the session's fields, and docs the
	// JSON documents in their canonical form.
	parts [5][]byte
	docs  [3][]byte
}

// PrepareChecksum encodes what the checksum covers, but for SessionID, Seq,
// ProjectPath and ParentID, which Sum takes from the checkpoint it is given.
// It fails as ComputeChecksum does.
func (c *Checkpoint) PrepareChecksum() (*PreparedChecksum, error) {
	f := c.checksumFields()
	f.SessionID, f.Seq, f.ProjectPath, f.ParentID = "", 0, "", ""
	b, err := json.Marshal(&f)
	if err != nil {
		return nil, err
	}
	// Each slot is the first of its kind after the one before: a string has
	// its quotes escaped, the files' keys are fixed, and the context's keys
	// are sorted, so its "parentId" is not followed by "hitlRequired".
	p := &PreparedChecksum{}
	rest := b
	for i, s := range sessionSlots {
		j := bytes.Index(rest, s.slot)
		if j < 0 {
			return nil, fmt.Errorf("checksum: no place for the session's fields in %.80q", b)
		}
		p.parts[i] = rest[:j+s.keep]
		rest = rest[j+s.skip:]
	}
	p.parts[4] = rest
	for j, doc := range []json.RawMessage{c.AgentState, c.Outputs, c.Metadata} {
		if p.docs[j], err = canonicalDocument(doc); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// sessionSlots are where json.Marshal writes checksumFields' empty session
// fields and nil JSON documents, between the fields around them: Sum writes
// the slot's first keep bytes, its value, and goes on skip bytes in.
var sessionSlots = [4]struct {
	slot       []byte
	keep, skip int
}{
	{[]byte(`,"sessionId":"","seq":0,"name":`), len(`,"sessionId":`), len(`,"sessionId":"","seq":0`)},
	{[]byte(`,"projectPath":"","workspaceRef":`), len(`,"projectPath":`), len(`,"projectPath":""`)},
	{documentSlots, 0, len(documentSlots) - 1},
	{[]byte(`,"parentId":"","hitlRequired":`), len(`,"parentId":`), len(`,"parentId":""`)},
}

// Sum returns the checksum of c, which must be the checkpoint p was
// prepared from, changed at most in SessionID, Seq, ProjectPath and ParentID:
// what ComputeChecksum returns.
func (p *PreparedChecksum) Sum(c *Checkpoint) string {
	// The documents are hashed where they are, the rest through one buffer.
	h := sha256.New()
	b := make([]byte, 0, len(p.parts[0])+len(p.parts[1])+len(p.parts[2])+len(p.parts[3])+len(p.parts[4])+128)
	b = appendJSONString(append(b, p.parts[0]...), c.SessionID)
	b = strconv.AppendInt(append(b, `,"seq":`...), c.Seq, 10)
	b = appendJSONString(append(b, p.parts[1]...), c.ProjectPath)
	h.Write(append(b, p.parts[2]...))
	for j, doc := range p.docs {
		h.Write(documentKeys[j])
		h.Write(doc)
	}
	h.Write(append(appendJSONString(append(b[:0], p.parts[3]...), c.ParentID), p.parts[4]...))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// appendJSONString appends s as json.Marshal writes a string. Printable
// ASCII that Marshal does not escape, as ids and paths mostly are, is
// appended as it is.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			m, _ := json.Marshal(s) // a string always marshals
			return append(b, m...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// documentSlots is how json.Marshal writes checksumFields' JSON documents
// when they are nil, up to the comma after them; documentKeys are their keys.
var (
	documentSlots = []byte(`,"agentState":null,"outputs":null,"metadata":null,`)
	documentKeys  = [][]byte{[]byte(`,"agentState":`), []byte(`,"outputs":`), []byte(`,"metadata":`)}
)

// canonicalDocument returns doc as json.Marshal writes a json.RawMessage:
// compacted, with <, >, & and U+2028/U+2029 escaped, "null" when nil. A
// document without whitespace outside strings and without those characters
// is returned as it is, with no second scan.
func canonicalDocument(doc json.RawMessage) ([]byte, error) {
	if doc == nil {
		return []byte("null"), nil
	}
	if canonical(doc) {
		return doc, nil
	}
	var compacted, escaped bytes.Buffer
	if err := json.Compact(&compacted, doc); err != nil {
		return nil, err
	}
	json.HTMLEscape(&escaped, compacted.Bytes())
	return escaped.Bytes(), nil
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

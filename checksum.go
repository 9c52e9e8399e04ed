package belay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
// canonical encoding.
func (c *Checkpoint) ComputeChecksum() (string, error) {
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
		AgentState: c.AgentState, Outputs: c.Outputs, Metadata: c.Metadata,
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
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
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

package archive

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/belayhq/belay"
)

// check checks the records read against each other and returns them.
func (rd *reader) check() (*Contents, error) {
	m := rd.manifest
	if m == nil {
		return nil, Invalid("no %s", ManifestFile)
	}
	if m.Format != Format || m.Version != Version {
		return nil, Invalid("format %q version %d is not %q version %d", belay.Clip(m.Format, 80), m.Version, Format, Version)
	}
	sess := m.Session
	if sess == nil || !belay.IsUUID(sess.ID) || sess.ID != m.SessionID {
		return nil, Invalid("the manifest names no valid session")
	}
	if err := validSession(sess); err != nil {
		return nil, err
	}
	c := &Contents{Session: sess, ExportedAt: m.ExportedAt}
	listed := map[string]bool{ManifestFile: true, RollbacksFile: true}
	byID := map[string]*belay.Checkpoint{}
	bySeq := map[int64]bool{}
	for _, e := range m.Checkpoints {
		cp, ok := rd.cps[e.File]
		if !ok || listed[e.File] {
			return nil, Invalid("checkpoint file %q is missing or listed twice", belay.Clip(e.File, 80))
		}
		listed[e.File] = true
		if err := cp.VerifyChecksum(); err != nil {
			return nil, err
		}
		switch {
		case cp.ID != e.CheckpointID || cp.Seq != e.Step || cp.Checksum != e.Checksum || e.File != entryID(cp)+".json":
			return nil, Invalid("%s does not match its manifest entry", e.File)
		case cp.SessionID != sess.ID:
			return nil, Invalid("%s is of another session", e.File)
		case byID[cp.ID] != nil || bySeq[cp.Seq] || cp.Seq < 1 || cp.Seq > sess.LastSeq:
			return nil, Invalid("%s repeats a checkpoint or has a seq out of range", e.File)
		}
		if err := validCheckpoint(cp); err != nil {
			return nil, Invalid("%s: %v", e.File, err)
		}
		byID[cp.ID], bySeq[cp.Seq] = cp, true
		c.Checkpoints = append(c.Checkpoints, cp)
	}
	for name := range rd.cps {
		if !listed[name] {
			return nil, Invalid("%s is not listed in the manifest", name)
		}
	}
	deleted := map[string]bool{}
	lacks := func(id string) {
		if id != "" && byID[id] == nil {
			deleted[id] = true
		}
	}
	lacks(sess.HeadCheckpointID)
	for _, cp := range c.Checkpoints {
		lacks(cp.ParentID)
	}
	if err := rd.checkRollbacks(lacks); err != nil {
		return nil, err
	}
	for id := range deleted {
		if !belay.IsUUID(id) {
			return nil, Invalid("the archive names a checkpoint %q that is no id", belay.Clip(id, 80))
		}
	}
	c.Deleted = slices.Sorted(maps.Keys(deleted))
	c.Rollbacks = rd.rollbacks
	snapshots := slices.ContainsFunc(c.Checkpoints, (*belay.Checkpoint).HasSnapshot)
	if snapshots != rd.bundle || (m.Bundle == BundleFile) != rd.bundle || m.Bundle != "" && m.Bundle != BundleFile {
		return nil, Invalid("the snapshots and %s do not match", BundleFile)
	}
	return c, nil
}

// checkRollbacks checks the rollback history, telling lacks the checkpoints
// each rollback names.
func (rd *reader) checkRollbacks(lacks func(id string)) error {
	if rd.rollbacks == nil {
		return Invalid("no %s", RollbacksFile)
	}
	seen := map[string]bool{}
	var ids []string
	for _, rb := range rd.rollbacks {
		switch {
		case rb == nil || !belay.IsUUID(rb.ID) || seen[rb.ID] || rb.SessionID != rd.manifest.SessionID:
			return Invalid("%s holds an invalid rollback", RollbacksFile)
		case rb.TargetID == "":
			return Invalid("rollback %s names no checkpoint", rb.ID)
		case len(rb.Reason) > belay.MaxReason*4 || len(rb.UserID) > belay.MaxNameLen*4 || len(rb.RestoredFiles) > MaxEntries:
			return Invalid("rollback %s is too large", rb.ID)
		}
		lacks(rb.TargetID)
		lacks(rb.FromCheckpointID)
		seen[rb.ID] = true
		ids = append(ids, rb.ID)
	}
	if !slices.Equal(ids, rd.manifest.RollbackHistory) {
		return Invalid("%s does not match the manifest", RollbacksFile)
	}
	return nil
}

// validSession checks an imported session against the limits a created one
// obeys.
func validSession(sess *belay.Session) error {
	in := belay.CreateSessionInput{Title: sess.Title, Phase: sess.Phase, Metadata: sess.Metadata}
	if err := in.Validate(); err != nil {
		return Invalid("session: %v", err)
	}
	switch {
	case !sess.Status.Valid():
		return Invalid("session status %q is unknown", belay.Clip(string(sess.Status), 80))
	case sess.ProjectPath != "" && belay.ValidateProjectPath("projectPath", sess.ProjectPath) != nil:
		return Invalid("session project path is not an absolute path of UTF-8 without NUL within %d bytes", belay.MaxPathLen)
	case sess.Holder != "" && belay.ValidateHolder("holder", sess.Holder) != nil:
		return Invalid("session holder is not 1-%d characters of UTF-8 without NUL", belay.MaxNameLen)
	case belay.ValidateEndReason("endReason", sess.EndReason) != nil:
		return Invalid("session end reason is not UTF-8 without NUL within %d bytes", belay.MaxEndReason)
	case sess.HeadCheckpointID != "" && !belay.IsUUID(sess.HeadCheckpointID):
		return Invalid("session head is not a checkpoint id")
	case sess.LastSeq < 0 || sess.CurrentStep < 0 || len(sess.Owner) > belay.MaxNameLen*4:
		return Invalid("session counters are out of range")
	}
	var be *belay.Error
	if err := belay.ValidateJSON("state", sess.State); errors.As(err, &be) {
		return Invalid("session %s", be.Message)
	}
	return nil
}

// validCheckpoint checks an imported checkpoint against the limits a saved
// one obeys, an older version's included. Its checksum proves it unchanged,
// not sane.
func validCheckpoint(cp *belay.Checkpoint) error {
	in := belay.CreateCheckpointInput{SessionID: cp.SessionID, Name: cp.Name, Type: cp.Type, Trigger: cp.Trigger,
		Summary: cp.Summary, Description: cp.Description, AgentState: cp.AgentState, Outputs: cp.Outputs,
		Metadata: cp.Metadata, Context: cp.Context, Tags: cp.Tags, Phase: cp.Phase, Step: cp.Step}
	if h := cp.HITL; h != nil {
		in.HITL = &belay.HITLInput{Title: h.Title, Message: h.Message, Options: h.Options,
			Context: h.Context, Approvers: h.Approvers, OnReject: h.OnReject}
		if t := h.Timeout; t != nil {
			in.HITL.Timeout = &belay.TimeoutInput{Duration: t.Duration, DefaultAction: t.DefaultAction}
		}
	}
	if err := in.ValidateStored(); err != nil {
		return err
	}
	switch {
	case !belay.IsUUID(cp.ID) || cp.ParentID != "" && !belay.IsUUID(cp.ParentID):
		return errors.New("ids are not UUIDs")
	case cp.Type == "" || cp.Trigger == "":
		return errors.New("type and trigger are required")
	case cp.HITLRequired != (cp.HITL != nil) || cp.Decision != nil && cp.HITL == nil:
		return errors.New("HITL fields disagree")
	case cp.ProjectPath != "" && belay.ValidateProjectPath("projectPath", cp.ProjectPath) != nil:
		return fmt.Errorf("project path is not an absolute path of UTF-8 without NUL within %d bytes", belay.MaxPathLen)
	case cp.WorkspaceRef != "" && (len(cp.WorkspaceRef) != 40 || !isHex(cp.WorkspaceRef)):
		return errors.New("workspaceRef is not a commit id")
	case len(cp.CreatedBy) > belay.MaxNameLen*4:
		return errors.New("createdBy is too long")
	}
	if d := cp.Decision; d != nil {
		if err := belay.ValidateJSON("decision.modifications", d.Modifications); err != nil {
			return err
		}
	}
	if f := cp.Files; f != nil {
		for _, p := range slices.Concat(f.Created, f.Modified, f.Deleted) {
			if err := belay.ValidateRelativePath("files", p); err != nil {
				return err
			}
		}
	}
	return nil
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

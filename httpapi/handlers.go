package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/belayhq/belay"
)

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	// The session's fields, the lease it is created held with and its first
	// checkpoint.
	var in struct {
		ProjectPath  string                       `json:"projectPath,omitempty"`
		Title        string                       `json:"title,omitempty"`
		Phase        string                       `json:"phase,omitempty"`
		Metadata     json.RawMessage              `json:"metadata,omitempty"`
		Holder       string                       `json:"holder,omitempty"`
		LeaseSeconds int                          `json:"leaseSeconds,omitempty"`
		Checkpoint   *belay.CreateCheckpointInput `json:"checkpoint,omitempty"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	lease, err := belay.Seconds("leaseSeconds", int64(in.LeaseSeconds))
	if err != nil {
		return err
	}
	sess, err := s.svc.CreateSession(r.Context(), belay.CreateSessionInput{ProjectPath: in.ProjectPath, Title: in.Title,
		Phase: in.Phase, Metadata: in.Metadata, Holder: in.Holder, Lease: lease,
		Checkpoint: in.Checkpoint})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sess)
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	in := belay.ListSessionsInput{ProjectPath: q.str("projectPath"), Status: belay.SessionStatus(q.str("status")),
		Own: q.flag("own"), Cursor: q.str("cursor"), Limit: q.limit()}
	if err := q.done(); err != nil {
		return err
	}
	list, err := s.svc.ListSessions(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) activeSession(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	path := q.str("projectPath")
	if err := q.done(); err != nil {
		return err
	}
	sess, err := s.svc.ActiveSession(r.Context(), path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	sess, err := s.svc.GetSession(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) getCheckpointBySeq(w http.ResponseWriter, r *http.Request) error {
	// The {id} of this route is a session's: name the field as core does.
	id := r.PathValue("id")
	if err := belay.ValidateID("sessionId", id); err != nil {
		return err
	}
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil {
		return belay.Invalid("seq", "seq must be a positive integer, got %q", r.PathValue("seq"))
	}
	cp, err := s.svc.GetCheckpointBySeq(r.Context(), id, seq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cp)
	return nil
}

func (s *Server) createCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var in belay.CreateCheckpointInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	cp, err := s.svc.CreateCheckpoint(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, cp)
	return nil
}

func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	in := belay.ListCheckpointsInput{
		SessionID: q.str("sessionId"), ProjectPath: q.str("projectPath"), Type: belay.CheckpointType(q.str("type")),
		HITLRequired: q.boolPtr("hitlRequired"), HITLDecided: q.boolPtr("hitlDecided"),
		CreatedAfter: q.time("createdAfter"), CreatedBefore: q.time("createdBefore"), Tags: q.list("tags"),
		Cursor: q.str("cursor"), Offset: q.int("offset"), Limit: q.limit(), OrderBy: q.str("orderBy"), OrderDir: q.str("orderDir"),
	}
	if err := q.done(); err != nil {
		return err
	}
	list, err := s.svc.ListCheckpoints(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

func (s *Server) getCheckpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	cp, err := s.svc.GetCheckpoint(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cp)
	return nil
}

func (s *Server) deleteCheckpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.svc.DeleteCheckpoint(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

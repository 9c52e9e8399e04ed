package httpapi

import (
	"net/http"
	"time"

	"github.com/belayhq/belay"
)

func (s *Server) decide(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.DecideInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.CheckpointID != "" && in.CheckpointID != id {
		return belay.Invalid("checkpointId", "checkpointId in the body (%s) differs from the one in the path (%s)", in.CheckpointID, id)
	}
	in.CheckpointID = id
	in.IdempotencyKey = r.Header.Get("Idempotency-Key")
	res, err := s.svc.Decide(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) waitDecision(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	q := newQuery(r)
	wait := time.Duration(0)
	if v := q.str("wait"); v != "" {
		if wait, err = time.ParseDuration(v); err != nil {
			return belay.Invalid("wait", "wait must be a duration from 0s to %s, e.g. 30s; got %q", belay.MaxWait, v)
		}
	}
	if err := q.done(); err != nil {
		return err
	}
	res, err := s.svc.WaitDecision(r.Context(), id, wait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	session := q.str("session")
	if err := q.done(); err != nil {
		return err
	}
	list, err := s.svc.PendingHITL(r.Context(), session)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
	return nil
}

package httpapi

import (
	"net/http"

	"github.com/belayhq/belay"
)

func (s *Server) resolveCheckpoint(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	in := belay.CheckpointRef{Ref: q.str("ref"), SessionID: q.str("sessionId"), ProjectPath: q.str("projectPath")}
	if err := q.done(); err != nil {
		return err
	}
	cp, err := s.svc.ResolveCheckpoint(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cp)
	return nil
}

func (s *Server) resolveSession(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	ref := q.str("ref")
	if err := q.done(); err != nil {
		return err
	}
	sess, err := s.svc.ResolveSession(r.Context(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) updateSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.UpdateSessionInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	sess, err := s.svc.UpdateSession(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) currentSession(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	path := q.str("projectPath")
	if err := q.done(); err != nil {
		return err
	}
	sess, err := s.svc.CurrentSession(r.Context(), path)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	list, err := s.svc.ListGrants(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
	return nil
}

func (s *Server) grantSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.GrantInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	if in.SessionID != "" && in.SessionID != id {
		return belay.Invalid("sessionId", "sessionId in the body must match the path")
	}
	in.SessionID = id
	g, err := s.svc.GrantSession(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, g)
	return nil
}

func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.svc.RevokeGrant(r.Context(), id, r.PathValue("user")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) error {
	var in belay.CreateTokenInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	tk, err := s.svc.CreateToken(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, tk)
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	if err := newQuery(r).done(); err != nil {
		return err
	}
	list, err := s.svc.ListTokens(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.svc.RevokeToken(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// webhookInput is the body of POST /v1/webhooks.
type webhookInput struct {
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
}

func (s *Server) addWebhook(w http.ResponseWriter, r *http.Request) error {
	var in webhookInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	hook, err := s.svc.AddWebhook(r.Context(), in.URL, in.Events)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, hook)
	return nil
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	if err := newQuery(r).done(); err != nil {
		return err
	}
	list, err := s.svc.ListWebhooks(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
	return nil
}

func (s *Server) removeWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := s.svc.RemoveWebhook(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	hook, limit := q.str("webhookId"), q.int("limit")
	if err := q.done(); err != nil {
		return err
	}
	list, err := s.svc.ListDeliveries(r.Context(), hook, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
	return nil
}

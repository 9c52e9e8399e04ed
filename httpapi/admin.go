package httpapi

import (
	"net/http"
	"time"

	"github.com/belayhq/belay"
)

func (s *Server) resolveCheckpoint(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	in := belay.CheckpointRef{Ref: q.str("ref"), Step: q.int("step"), SessionID: q.str("sessionId"), ProjectPath: q.str("projectPath")}
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

func (s *Server) endSession(status belay.SessionStatus) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		var in struct {
			Reason string              `json:"reason,omitempty"`
			Events []belay.EventRecord `json:"events,omitempty"`
		}
		if err := decodeOptionalJSON(w, r, &in); err != nil {
			return err
		}
		sess, err := s.svc.EndSession(r.Context(), belay.EndSessionInput{SessionID: id, Status: status, Reason: in.Reason, Events: in.Events})
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, sess)
		return nil
	}
}

// leaseBody is the body of heartbeat and resume: the lease in seconds, and
// the events a release appends.
type leaseBody struct {
	Holder       string              `json:"holder"`
	LeaseSeconds int                 `json:"leaseSeconds,omitempty"`
	ProjectPath  string              `json:"projectPath,omitempty"`
	Release      bool                `json:"release,omitempty"`
	Events       []belay.EventRecord `json:"events,omitempty"`
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in leaseBody
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	lease, err := belay.Seconds("leaseSeconds", int64(in.LeaseSeconds))
	if err != nil {
		return err
	}
	sess, err := s.svc.Heartbeat(r.Context(), belay.LeaseInput{SessionID: id, Holder: in.Holder,
		Lease: lease, Release: in.Release, Events: in.Events})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in leaseBody
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	lease, err := belay.Seconds("leaseSeconds", int64(in.LeaseSeconds))
	if err != nil {
		return err
	}
	res, err := s.svc.ResumeSession(r.Context(), belay.ResumeInput{SessionID: id, Holder: in.Holder, Lease: lease})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) resumeLatest(w http.ResponseWriter, r *http.Request) error {
	var in leaseBody
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	lease, err := belay.Seconds("leaseSeconds", int64(in.LeaseSeconds))
	if err != nil {
		return err
	}
	res, err := s.svc.ResumeSession(r.Context(), belay.ResumeInput{ProjectPath: in.ProjectPath, Holder: in.Holder, Lease: lease})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// cleanupBody is the body of POST /v1/sessions/cleanup.
type cleanupBody struct {
	OlderThanSeconds int64                 `json:"olderThanSeconds,omitempty"`
	Statuses         []belay.SessionStatus `json:"statuses,omitempty"`
	KeepLast         int                   `json:"keepLast,omitempty"`
	DryRun           bool                  `json:"dryRun,omitempty"`
}

func (s *Server) cleanupSessions(w http.ResponseWriter, r *http.Request) error {
	var in cleanupBody
	if err := decodeOptionalJSON(w, r, &in); err != nil {
		return err
	}
	olderThan, err := belay.Seconds("olderThanSeconds", in.OlderThanSeconds)
	if err != nil {
		return err
	}
	res, err := s.svc.CleanupSessions(r.Context(), belay.CleanupInput{OlderThan: olderThan,
		Statuses: in.Statuses, KeepLast: in.KeepLast, DryRun: in.DryRun})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) setPlan(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.SetPlanInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	in.SessionID = id
	sess, err := s.svc.SetPlan(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) updateTask(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.TaskUpdate
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	in.SessionID, in.TaskID = id, r.PathValue("task")
	res, err := s.svc.UpdateTask(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) addCost(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.CostInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	in.SessionID = id
	res, err := s.svc.AddCost(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) adjustPlan(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.PlanAdjustment
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	sess, err := s.svc.AdjustPlan(r.Context(), id, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

func (s *Server) taskContext(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	out, err := s.svc.TaskContext(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// retentionBody is a retention policy on the wire: its age in seconds.
type retentionBody struct {
	ProjectPath   string `json:"projectPath"`
	KeepLast      int    `json:"keepLast,omitempty"`
	MaxAgeSeconds int64  `json:"maxAgeSeconds,omitempty"`
}

func (s *Server) setRetention(w http.ResponseWriter, r *http.Request) error {
	var in retentionBody
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	maxAge, err := belay.Seconds("maxAgeSeconds", in.MaxAgeSeconds)
	if err != nil {
		return err
	}
	p, err := s.svc.SetRetention(r.Context(), belay.RetentionPolicy{ProjectPath: in.ProjectPath, KeepLast: in.KeepLast, MaxAge: maxAge})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, retentionBody{ProjectPath: p.ProjectPath, KeepLast: p.KeepLast, MaxAgeSeconds: int64(p.MaxAge / time.Second)})
	return nil
}

func (s *Server) listRetention(w http.ResponseWriter, r *http.Request) error {
	list, err := s.svc.ListRetention(r.Context())
	if err != nil {
		return err
	}
	out := make([]retentionBody, len(list))
	for i, p := range list {
		out[i] = retentionBody{ProjectPath: p.ProjectPath, KeepLast: p.KeepLast, MaxAgeSeconds: int64(p.MaxAge / time.Second)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": out})
	return nil
}

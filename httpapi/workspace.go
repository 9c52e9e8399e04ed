package httpapi

import (
	"net/http"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/archive"
)

func (s *Server) restoreCheckpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var in belay.RestoreInput
	// The body is optional: a bare POST restores without a reason.
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &in); err != nil {
			return err
		}
	}
	if in.CheckpointID != "" && in.CheckpointID != id {
		return belay.Invalid("checkpointId", "checkpointId in the body (%s) differs from the one in the path (%s)", in.CheckpointID, id)
	}
	in.CheckpointID = id
	res, err := s.svc.RestoreCheckpoint(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) diffCheckpoint(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	q := newQuery(r)
	in := belay.DiffInput{CheckpointID: id, To: q.str("to")}
	if err := q.done(); err != nil {
		return err
	}
	res, err := s.svc.DiffCheckpoint(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listRollbacks(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := belay.ValidateID("sessionId", id); err != nil {
		return err
	}
	list, err := s.svc.ListRollbacks(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": list})
	return nil
}

func (s *Server) validate(w http.ResponseWriter, r *http.Request) error {
	var in belay.ValidateInput
	if r.Method == http.MethodPost {
		if err := decodeJSON(w, r, &in); err != nil {
			return err
		}
	} else {
		q := newQuery(r)
		in.SessionID = q.str("session")
		if err := q.done(); err != nil {
			return err
		}
	}
	rep, err := s.svc.Validate(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// startOnWrite sends the headers of a download with its first byte, so an
// export that fails before writing anything still gets an error body.
type startOnWrite struct {
	w        http.ResponseWriter
	filename string
	started  bool
}

func (d *startOnWrite) Write(p []byte) (int, error) {
	if !d.started {
		d.started = true
		h := d.w.Header()
		h.Set("Content-Type", "application/gzip")
		h.Set("Content-Disposition", `attachment; filename="`+d.filename+`"`)
		d.w.WriteHeader(http.StatusOK)
	}
	return d.w.Write(p)
}

func (s *Server) exportSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := belay.ValidateID("sessionId", id); err != nil {
		return err
	}
	out := &startOnWrite{w: w, filename: "belay-" + id + ".tar.gz"}
	err := s.svc.ExportSession(r.Context(), id, out)
	if err != nil && out.started {
		// Half an archive is sent: break the response so the client sees a
		// failed transfer, not a short file.
		s.log.Error("export failed while sending", "sessionId", id, "error", err)
		panic(http.ErrAbortHandler)
	}
	return err
}

func (s *Server) importSession(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	in := belay.ImportInput{ProjectPath: q.str("projectPath")}
	if err := q.done(); err != nil {
		return err
	}
	// An archive may be piped from an export still gathering it: its body
	// keeps no pace (only admins import, and core refuses others at once).
	if pb, ok := r.Body.(*pacedBody); ok {
		pb.relax()
	}
	res, err := s.svc.ImportSession(r.Context(), in, http.MaxBytesReader(w, r.Body, archive.MaxBytes))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}

func (s *Server) exportBranch(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := belay.ValidateID("sessionId", id); err != nil {
		return err
	}
	var in belay.ExportBranchInput
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &in); err != nil {
			return err
		}
	}
	if in.SessionID != "" && in.SessionID != id {
		return belay.Invalid("sessionId", "sessionId in the body (%s) differs from the one in the path (%s)", in.SessionID, id)
	}
	in.SessionID = id
	res, err := s.svc.ExportBranch(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) diskUsage(w http.ResponseWriter, r *http.Request) error {
	rep, err := s.svc.DiskUsage(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (s *Server) collectGarbage(w http.ResponseWriter, r *http.Request) error {
	var in belay.GCInput
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &in); err != nil {
			return err
		}
	}
	rep, err := s.svc.CollectGarbage(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	res, err := s.svc.DeleteSession(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

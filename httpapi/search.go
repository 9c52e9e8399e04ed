package httpapi

import (
	"net/http"

	"github.com/belayhq/belay"
)

// search answers GET /v1/search?q=&projectPath=&tag=&topK=&explain=; a
// validation error about q names the field "query", as core does.
func (s *Server) search(w http.ResponseWriter, r *http.Request) error {
	q := newQuery(r)
	in := belay.SearchInput{Query: q.str("q"), ProjectPath: q.str("projectPath"), Tags: q.list("tag"), TopK: q.int("topK"),
		Explain: q.flag("explain")}
	if err := q.done(); err != nil {
		return err
	}
	if _, given := r.URL.Query()["topK"]; given && in.TopK == 0 {
		return belay.Invalid("topK", "topK must be 1-%d, got 0", belay.MaxTopK)
	}
	res, err := s.svc.SearchCheckpoints(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) reindex(w http.ResponseWriter, r *http.Request) error {
	var in belay.ReindexInput
	if err := decodeOptionalJSON(w, r, &in); err != nil {
		return err
	}
	st, err := s.svc.Reindex(r.Context(), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, st)
	return nil
}

func (s *Server) indexStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := s.svc.IndexStatus(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/belayhq/belay"
)

type errorBody struct {
	Error *belay.Error `json:"error"`
}

// publicError turns any error into the *belay.Error a client may see. A
// *belay.Error is written for people (even an INTERNAL_ERROR such as "git is
// not available") and passes through, logged with its cause when it is the
// server's failure (a 5xx status, such as STORAGE_UNAVAILABLE); any other
// error is internal: it is logged and never shown.
func (s *Server) publicError(r *http.Request, err error) *belay.Error {
	var be *belay.Error
	switch {
	case errors.As(err, &be):
		if be.Code.HTTPStatus() >= http.StatusInternalServerError {
			s.log.LogAttrs(r.Context(), slog.LevelError, "server error", slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.Any("error", err))
		}
		return be
	case errors.Is(err, context.DeadlineExceeded):
		return belay.Errorf(belay.CodeTimeout, "operation exceeded timeout").With("timeout", s.timeout.String())
	}
	s.log.LogAttrs(r.Context(), slog.LevelError, "internal error", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Any("error", err))
	return belay.Errorf(belay.CodeInternal, "internal error")
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	be := s.publicError(r, err)
	if after, ok := be.RetryAfter(); ok {
		w.Header().Set("Retry-After", strconv.Itoa(after))
	}
	writeJSON(w, be.Code.HTTPStatus(), errorBody{Error: be})
}

package core

import (
	"context"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
)

// MaxEventPage bounds one read of the event log.
const MaxEventPage = 500

// ListEvents returns events after q.After in order, at most MaxEventPage.
func (s *Service) ListEvents(ctx context.Context, q store.EventQuery) ([]belay.Event, error) {
	if q.Limit <= 0 || q.Limit > MaxEventPage {
		q.Limit = MaxEventPage
	}
	if q.SessionID != "" {
		if err := belay.ValidateID("session", q.SessionID); err != nil {
			return nil, err
		}
	}
	return s.store.ListEvents(ctx, q)
}

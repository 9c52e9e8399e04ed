package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/store"
	"github.com/belayhq/belay/webhook"
)

// Webhook limits.
const (
	MaxWebhookURL = 2048
	// MaxDeliveryPage bounds one read of the delivery log.
	MaxDeliveryPage = belay.MaxDeliveryPage
)

// webhookSecretPrefix marks webhook signing secrets.
const webhookSecretPrefix = "whsec_"

func newWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return webhookSecretPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// webhookAdmin lets only an admin manage webhooks, which see every event;
// need is write for what adds or removes one.
func webhookAdmin(ctx context.Context, need belay.Scope, what string) error {
	_, err := authorizeAdmin(ctx, need, what)
	return err
}

func validWebhookURL(raw string) error {
	if raw == "" || len(raw) > MaxWebhookURL {
		return belay.Invalid("url", "url must be 1-%d characters", MaxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return belay.Invalid("url", "url is not valid: %q", belay.Clip(raw, 200))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return belay.Invalid("url", "url must start with http:// or https://, got %q", belay.Clip(raw, 200))
	}
	if u.Hostname() == "" {
		return belay.Invalid("url", "url must name a host, got %q", belay.Clip(raw, 200))
	}
	// url.Parse takes any digits as a port, and none after the colon; a
	// delivery cannot dial one outside 1-65535.
	if strings.HasSuffix(u.Host, ":") {
		return belay.Invalid("url", "url's port must be 1-65535, got none after the colon")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return belay.Invalid("url", "url's port must be 1-65535, got %s", belay.Clip(p, 20))
		}
	}
	return nil
}

// AddWebhook registers url to receive every future event of the given types
// (all types when none are given). Only an admin may. The returned webhook
// carries its signing secret; later reads do not.
func (s *Service) AddWebhook(ctx context.Context, url string, events []string) (*belay.Webhook, error) {
	if err := webhookAdmin(ctx, belay.ScopeWrite, "add webhooks"); err != nil {
		return nil, err
	}
	if err := validWebhookURL(url); err != nil {
		return nil, err
	}
	if err := belay.ValidateEventTypes("events", events); err != nil {
		return nil, err
	}
	var types []string
	for _, t := range events {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	w := &belay.Webhook{ID: newID(), URL: url, Secret: newWebhookSecret(), Events: types, CreatedAt: s.clock.Now()}
	err := s.update(ctx, func(tx store.Tx) error {
		var err error
		// Only events from now on: reading the position in the same
		// transaction leaves no gap and no overlap.
		if w.LastSeq, err = tx.LastEventSeq(ctx); err != nil {
			return err
		}
		return tx.InsertWebhook(ctx, w)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// ListWebhooks returns the webhooks, oldest first, without their secrets.
// Only an admin may.
func (s *Service) ListWebhooks(ctx context.Context) ([]*belay.Webhook, error) {
	if err := webhookAdmin(ctx, belay.ScopeRead, "list webhooks"); err != nil {
		return nil, err
	}
	hooks, err := s.store.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range hooks {
		w.Secret = ""
	}
	if hooks == nil {
		hooks = []*belay.Webhook{}
	}
	return hooks, nil
}

// RemoveWebhook deletes a webhook and its delivery log. Only an admin may.
// Deliveries already in flight may still arrive.
func (s *Service) RemoveWebhook(ctx context.Context, id string) error {
	if err := webhookAdmin(ctx, belay.ScopeWrite, "remove webhooks"); err != nil {
		return err
	}
	if err := belay.ValidateID("id", id); err != nil {
		return err
	}
	return s.update(ctx, func(tx store.Tx) error {
		return tx.DeleteWebhook(ctx, id)
	})
}

// ListDeliveries returns the newest delivery attempts, of one webhook when
// webhookID is set. limit 0 means belay.DefaultListLimit. Only an admin may.
func (s *Service) ListDeliveries(ctx context.Context, webhookID string, limit int) ([]*belay.Delivery, error) {
	if err := webhookAdmin(ctx, belay.ScopeRead, "read the webhook delivery log"); err != nil {
		return nil, err
	}
	if limit < 0 || limit > MaxDeliveryPage {
		return nil, belay.Invalid("limit", "limit must be 1-%d, got %d", MaxDeliveryPage, limit)
	}
	if limit == 0 {
		limit = belay.DefaultListLimit
	}
	if webhookID != "" {
		if err := belay.ValidateID("webhookId", webhookID); err != nil {
			return nil, err
		}
		hooks, err := s.store.ListWebhooks(ctx)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(hooks, func(w *belay.Webhook) bool { return w.ID == webhookID }) {
			return nil, belay.Errorf(belay.CodeNotFound, "webhook %s not found", webhookID).With("id", webhookID)
		}
	}
	list, err := s.store.ListDeliveries(ctx, store.DeliveryQuery{WebhookID: webhookID, Limit: limit})
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*belay.Delivery{}
	}
	return list, nil
}

// WebhookSource is the webhook dispatcher's view of the service, for
// webhook.Run: the webhooks with their secrets, the event log, wake-ups after
// each change made through s, and the delivery log. It checks no permission:
// give it to the process's own dispatcher, never to a caller.
func (s *Service) WebhookSource() webhook.Source { return webhookSource{s} }

type webhookSource struct{ s *Service }

func (w webhookSource) Webhooks(ctx context.Context) ([]*belay.Webhook, error) {
	return w.s.store.ListWebhooks(ctx)
}

func (w webhookSource) Events(ctx context.Context, after int64, types []string, limit int) ([]belay.Event, error) {
	return w.s.store.ListEvents(ctx, store.EventQuery{Scope: store.Everything, After: after, Types: types, Limit: limit})
}

func (w webhookSource) Wake() (<-chan struct{}, func()) { return w.s.Wake() }

func (w webhookSource) RecordDelivery(ctx context.Context, d *belay.Delivery, advance bool) error {
	// Straight to the store: a delivery appends no event, so there is no one
	// to wake.
	return w.s.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.InsertDelivery(ctx, d); err != nil {
			return err
		}
		if advance {
			return tx.AdvanceWebhook(ctx, d.WebhookID, d.EventSeq)
		}
		return nil
	})
}

func (w webhookSource) LastAttempt(ctx context.Context, webhookID string, seq int64) (*belay.Delivery, error) {
	return w.s.store.LastDelivery(ctx, webhookID, seq)
}

func (w webhookSource) ClaimWebhook(ctx context.Context, id, holder string, now, until time.Time) (bool, error) {
	var ok bool
	err := w.s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		ok, err = tx.ClaimWebhook(ctx, id, holder, now, until)
		return err
	})
	return ok, err
}

package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/internal/testclock"
	"github.com/belayhq/belay/store"
)

// notifyingStore adds a Notifier, shared by every store on one "database",
// to a real store, as PostgreSQL's driver will.
type notifyingStore struct {
	store.Store
	bus *bus
}

type bus struct {
	mu        sync.Mutex
	listeners map[chan struct{}]bool
}

// Update announces a commit, as PostgreSQL's driver does.
func (n notifyingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := n.Store.Update(ctx, fn); err != nil {
		return err
	}
	n.bus.mu.Lock()
	defer n.bus.mu.Unlock()
	for ch := range n.bus.listeners {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

func (n notifyingStore) Listen() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.bus.mu.Lock()
	n.bus.listeners[ch] = true
	n.bus.mu.Unlock()
	return ch, func() {
		n.bus.mu.Lock()
		delete(n.bus.listeners, ch)
		n.bus.mu.Unlock()
	}
}

// TestStoreNotifierWakesOtherServices: a commit through one service, which
// the store announces, wakes another service's stream at once.
func TestStoreNotifierWakesOtherServices(t *testing.T) {
	clock := testclock.New(start, 0)
	base := core.StoreOf(newService(t, clock))
	b := &bus{listeners: map[chan struct{}]bool{}}
	writer := core.New(core.Options{Store: notifyingStore{base, b}, Clock: clock})
	reader := core.New(core.Options{Store: notifyingStore{base, b}, Clock: clock})

	ctx, cancel := context.WithTimeout(localCtx, 10*time.Second)
	defer cancel()
	got := make(chan belay.Event, 1)
	opened := make(chan struct{})
	go func() {
		_ = reader.Follow(ctx, belay.EventFilter{After: belay.FromNow}, 0, func(_ int64, batch []belay.Event) error {
			if batch == nil {
				close(opened)
			}
			for _, e := range batch {
				got <- e
			}
			return nil
		})
	}()
	<-opened
	for {
		b.mu.Lock()
		n := len(b.listeners)
		b.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mustCreate(t, writer, belay.CreateCheckpointInput{ProjectPath: t.TempDir(), Summary: "heard elsewhere"})
	select {
	case e := <-got:
		if e.Type != belay.EventSessionCreated {
			t.Errorf("first event = %s", e.Type)
		}
	case <-ctx.Done():
		t.Fatal("the other service's stream never saw the commit")
	}
}

package graph

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/belayhq/belay"
)

// A run is held by the process running it through its session's lease (the
// session life of belay.LifeService): Run and Resume take it, renew it in the
// background while nodes run, and give it up when the run stops — by ending
// the session at END or on failure, or by releasing it at an interrupt. A
// process that dies mid-node stops renewing; the lease lapses, the session
// becomes interrupted, and Resume continues the run from its last checkpoint.

// newHolder names one Run or Resume call: host:pid:random, so two calls of
// one process never share a lease.
func newHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return belay.Clip(fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:])), belay.MaxNameLen)
}

// holding renews a run's lease until stopped. When a renewal fails with
// LEASE_LOST the run must not write again: lost reports it, and the nodes'
// context is cancelled with it.
type holding struct {
	svc    belay.Service
	in     belay.LeaseInput
	cancel context.CancelCauseFunc
	stopc  chan struct{}
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	err    error
}

// hold starts renewing the lease in taken for the run; the returned context
// ends when the lease is lost.
func hold(ctx context.Context, svc belay.Service, in belay.LeaseInput) (*holding, context.Context) {
	ctx, cancel := context.WithCancelCause(ctx)
	h := &holding{svc: svc, in: in, cancel: cancel, stopc: make(chan struct{}), done: make(chan struct{})}
	go h.renew(ctx)
	return h, ctx
}

func (h *holding) renew(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.in.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stopc:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			_, err := h.svc.Heartbeat(ctx, h.in)
			if belay.IsCode(err, belay.CodeLeaseLost) {
				h.mu.Lock()
				h.err = err
				h.mu.Unlock()
				h.cancel(err)
				return
			}
		}
	}
}

// lost is the LEASE_LOST error once another process holds the run.
func (h *holding) lost() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// stopRenewing ends the renewals; the run's context lives on.
func (h *holding) stopRenewing() {
	h.once.Do(func() { close(h.stopc) })
	<-h.done
}

// stop ends the renewals and the run's context.
func (h *holding) stop() {
	h.stopRenewing()
	h.cancel(nil)
}

// release gives the lease up, appending events in the same call: a run
// awaiting a decision keeps waiting, held by no one; a run stopped by an
// error or a cancelled context becomes interrupted, to be resumed. A lease
// already lost is LEASE_LOST, and nothing is appended.
func (h *holding) release(ctx context.Context, events ...belay.EventRecord) error {
	h.stop()
	in := h.in
	in.Release, in.Events = true, events
	_, err := h.svc.Heartbeat(context.WithoutCancel(ctx), in)
	return err
}

package core_test

import (
	"testing"
	"testing/synctest"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/core"
	"github.com/belayhq/belay/store"
)

// TestSavesRunAgainAfterAnUndoneBatch: saves share a transaction without
// savepoints (store.Batcher), so when one fails after it wrote, the others'
// fns run again. What they report and what they stored agree, as if each had
// run once: seqs in order, parents, checksums, a session started once.
func TestSavesRunAgainAfterAnUndoneBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		svc := bubbleService(t)
		db := core.StoreOf(svc)
		sess, err := svc.CreateSession(localCtx, belay.CreateSessionInput{Title: "batch"})
		if err != nil {
			t.Fatal(err)
		}
		project := t.TempDir()
		release := make(chan struct{})
		held := make(chan error, 1)
		go func() { held <- db.Update(localCtx, func(store.Tx) error { <-release; return nil }) }()
		synctest.Wait() // the writer is busy: the saves below share the next batch
		inputs := []belay.CreateCheckpointInput{
			{SessionID: sess.ID, Summary: "first", AgentState: []byte(`{"n":1}`)},
			{ProjectPath: project, Summary: "starts a session"},
			// Fails after it wrote its checkpoint and first event.
			{SessionID: sess.ID, Summary: "bad", Events: []belay.EventRecord{
				{Type: belay.EventGraphNodeStart, ThisCheckpoint: true},
				{Type: belay.EventGraphNodeEnd, CheckpointID: "0190c2a0-0000-7000-8000-000000000099"},
			}},
			{SessionID: sess.ID, Summary: "second", AgentState: []byte(`{"n":2}`)},
		}
		cps := make([]*belay.Checkpoint, len(inputs))
		errs := make([]error, len(inputs))
		done := make(chan struct{}, len(inputs))
		for i, in := range inputs {
			go func() {
				cps[i], errs[i] = svc.CreateCheckpoint(localCtx, in)
				done <- struct{}{}
			}()
			synctest.Wait()
		}
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		for range inputs {
			<-done
		}
		if !belay.IsCode(errs[2], belay.CodeValidation) {
			t.Errorf("the bad save: %v; want VALIDATION_ERROR", errs[2])
		}
		for _, i := range []int{0, 1, 3} {
			if errs[i] != nil {
				t.Fatalf("save %q: %v", inputs[i].Summary, errs[i])
			}
			got, err := svc.GetCheckpoint(localCtx, cps[i].ID) // verifies the checksum
			if err != nil {
				t.Fatalf("GetCheckpoint %q: %v", inputs[i].Summary, err)
			}
			if got.Seq != cps[i].Seq || got.ParentID != cps[i].ParentID || got.SessionID != cps[i].SessionID || got.Checksum != cps[i].Checksum {
				t.Errorf("save %q reported seq %d parent %q session %s checksum %s; stored %d %q %s %s", inputs[i].Summary,
					cps[i].Seq, cps[i].ParentID, cps[i].SessionID, cps[i].Checksum, got.Seq, got.ParentID, got.SessionID, got.Checksum)
			}
		}
		if cps[0].Seq != 1 || cps[3].Seq != 2 || cps[3].ParentID != cps[0].ID {
			t.Errorf("seqs %d, %d, second's parent %q; want 1, 2, %s", cps[0].Seq, cps[3].Seq, cps[3].ParentID, cps[0].ID)
		}
		after := mustSession(t, svc, sess.ID)
		if after.LastSeq != 2 || after.CheckpointCount != 2 || after.HeadCheckpointID != cps[3].ID || string(after.State) != `{"n":2}` {
			t.Errorf("session after: last seq %d, count %d, head %s, state %s; want 2, 2, %s, {\"n\":2}",
				after.LastSeq, after.CheckpointCount, after.HeadCheckpointID, after.State, cps[3].ID)
		}
		started, _, _, err := core.StoreOf(svc).ListSessions(localCtx, store.SessionQuery{Scope: store.Everything, ProjectPath: project, Limit: 10})
		if err != nil || len(started) != 1 || started[0].ID != cps[1].SessionID {
			t.Errorf("sessions of the project: %d, %v; want the one save 2 reported (%s)", len(started), err, cps[1].SessionID)
		}
		var created, nodeStarts int
		for _, e := range events(t, svc) {
			switch e.Type {
			case belay.EventCheckpointCreated:
				created++
			case belay.EventGraphNodeStart:
				nodeStarts++
			}
		}
		if created != 3 || nodeStarts != 0 {
			t.Errorf("%d checkpoint.created and %d graph events; want 3 and none of the bad save's", created, nodeStarts)
		}
	})
}

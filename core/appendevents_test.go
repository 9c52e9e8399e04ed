package core_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/belayhq/belay"
	"github.com/belayhq/belay/internal/testutil"
)

func TestAppendEvents(t *testing.T) {
	svc := newService(t, nil)
	alice, bob := asUser("alice"), asUser("bob")
	sess, err := svc.CreateSession(alice, belay.CreateSessionInput{})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: sess.ID, Summary: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.CreateSession(alice, belay.CreateSessionInput{})
	if err != nil {
		t.Fatal(err)
	}
	otherCP, err := svc.CreateCheckpoint(alice, belay.CreateCheckpointInput{SessionID: other.ID, Summary: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateToken(localCtx, belay.CreateTokenInput{User: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GrantSession(alice, belay.GrantInput{SessionID: sess.ID, User: "bob", Role: belay.RoleRead}); err != nil {
		t.Fatal(err)
	}

	good := []belay.EventRecord{
		{Type: belay.EventGraphNodeStart, Data: json.RawMessage(`{"node":"plan","step":1}`)},
		{Type: belay.EventGraphNodeEnd, CheckpointID: cp.ID, Data: json.RawMessage(`{"node":"plan","step":1,"next":"review"}`)},
	}
	in := func(evs ...belay.EventRecord) belay.AppendEventsInput {
		return belay.AppendEventsInput{SessionID: sess.ID, Events: evs}
	}
	before := len(events(t, svc))
	for _, c := range []struct {
		name  string
		in    belay.AppendEventsInput
		field string
	}{
		{"no events", in(), "events"},
		{"a type of belay's own", in(belay.EventRecord{Type: belay.EventCheckpointCreated}), "events[0].type"},
		{"an unknown graph type", in(good[0], belay.EventRecord{Type: "graph.anything"}), "events[1].type"},
		{"data not an object", in(belay.EventRecord{Type: belay.EventGraphCustom, Data: json.RawMessage(`[1]`)}), "events[0].data"},
		{"data too big", in(belay.EventRecord{Type: belay.EventGraphCustom,
			Data: json.RawMessage(`{"text":"` + strings.Repeat("x", belay.MaxEventData) + `"}`)}), "events[0].data"},
		{"too many", in(make([]belay.EventRecord, belay.MaxAppendEvents+1)...), "events"},
		{"a checkpoint of another session", in(good[0], belay.EventRecord{Type: belay.EventGraphNodeEnd, CheckpointID: otherCP.ID}), "events[1].checkpointId"},
		{"a bad session id", belay.AppendEventsInput{SessionID: "nope", Events: good}, "sessionId"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := svc.AppendEvents(alice, c.in)
			testutil.WantCode(t, err, belay.CodeValidation, c.field)
		})
	}
	_, err = svc.AppendEvents(bob, in(good...))
	testutil.WantCode(t, err, belay.CodeUnauthorized, "")
	_, err = svc.AppendEvents(asUser("mallory"), in(good...))
	testutil.WantCode(t, err, belay.CodeSessionNotFound, "")
	if n := len(events(t, svc)); n != before {
		t.Fatalf("refused appends wrote %d events", n-before)
	}

	got, err := svc.AppendEvents(alice, in(good...))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Seq != got[0].Seq+1 || got[1].CheckpointID != cp.ID || got[0].SessionID != sess.ID {
		t.Fatalf("appended %+v", got)
	}
	evs := events(t, svc)
	last := evs[len(evs)-2:]
	if last[0].Type != belay.EventGraphNodeStart || last[1].Type != belay.EventGraphNodeEnd || string(last[1].Data) != string(good[1].Data) {
		t.Fatalf("the log ends with %+v", last)
	}
}

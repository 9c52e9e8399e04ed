package belay_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/belayhq/belay"
)

var t0 = time.Date(2026, time.March, 4, 5, 6, 7, 123456789, time.UTC)

// checksumFixture returns the same checkpoint, every field set, on every call.
func checksumFixture() *belay.Checkpoint {
	expires := t0.Add(48 * time.Hour)
	return &belay.Checkpoint{
		ID: "0190c2a0-0000-7000-8000-000000000001", SessionID: "0190c2a0-0000-7000-8000-000000000002",
		Seq: 3, Name: "architecture", Type: belay.TypeHITL, Trigger: belay.TriggerPhaseChange,
		Summary: "Chose PostgreSQL ✓", Description: "details", ProjectPath: "/home/alice/project",
		WorkspaceRef: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		Files:        &belay.FileChanges{Created: []string{"a.go"}, Modified: []string{"b.go"}, Deleted: []string{"c.go"}},
		AgentState:   json.RawMessage(`{"step":3,"notes":["a"]}`),
		Outputs:      json.RawMessage(`[1,2]`),
		Metadata:     json.RawMessage(`{"cost":0.25}`),
		Context:      map[string]string{"branch": "main", "commit": "abc"},
		Tags:         []string{"db", "arch"},
		Phase:        "design", Step: 7, ParentID: "0190c2a0-0000-7000-8000-000000000000",
		HITLRequired: true,
		HITL: &belay.HITLRequest{
			Title: "Which database?", Message: "Pick one.",
			Options: []belay.HITLOption{
				{ID: "pg", Label: "PostgreSQL", Description: "scales", Action: belay.ActionApprove, IsDefault: true},
				{ID: "lite", Label: "SQLite", Action: belay.ActionModify},
			},
			Context:            json.RawMessage(`{"k":"v"}`),
			Timeout:            &belay.HITLTimeout{Duration: 3600, DefaultAction: belay.ActionReject, ExpiresAt: t0.Add(time.Hour)},
			Approvers:          []string{"bob"},
			ForbidSelfApproval: true,
			OnReject:           belay.OnRejectContinue,
		},
		CreatedBy: "agent-7",
		CreatedAt: t0,
		ExpiresAt: &expires,
	}
}

func mustChecksum(t *testing.T, c *belay.Checkpoint) string {
	t.Helper()
	sum, err := c.ComputeChecksum()
	if err != nil {
		t.Fatalf("ComputeChecksum: %v", err)
	}
	return sum
}

// TestChecksumGolden pins the canonical encoding: changing it makes every
// checksum already stored fail verification.
func TestChecksumGolden(t *testing.T) {
	const want = "sha256:d2083a4b0864de85ecb097e42ea1b7696fa55ae906bb43d94dddd80dd00620f5"
	sum := mustChecksum(t, checksumFixture())
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(sum) {
		t.Fatalf("checksum %q is not sha256:<64 hex digits>", sum)
	}
	if sum != want {
		t.Errorf("checksum = %s, want %s", sum, want)
	}
	if again := mustChecksum(t, checksumFixture()); again != sum {
		t.Errorf("checksum is not stable: %s then %s", sum, again)
	}
}

// TestPreparedChecksum: a checksum prepared before the session's fields are
// set, summed after, is ComputeChecksum's, every field set.
func TestPreparedChecksum(t *testing.T) {
	c := checksumFixture()
	c.SessionID, c.Seq, c.ProjectPath, c.ParentID = "", 0, "", ""
	p, err := c.PrepareChecksum()
	if err != nil {
		t.Fatal(err)
	}
	want := checksumFixture()
	c.SessionID, c.Seq, c.ProjectPath, c.ParentID = want.SessionID, want.Seq, want.ProjectPath, want.ParentID
	if got := p.Sum(c); got != mustChecksum(t, want) {
		t.Errorf("Sum = %s, want ComputeChecksum's %s", got, mustChecksum(t, want))
	}
}

// uncovered are the fields that change after a checkpoint is created, or are
// derived from covered ones (a token count may be taken again with another
// tokenizer), so the checksum leaves them out.
var uncovered = map[string]func(c *belay.Checkpoint){
	"Checksum": func(c *belay.Checkpoint) { c.Checksum = "sha256:00" },
	"Decision": func(c *belay.Checkpoint) {
		c.Decision = &belay.Decision{ID: "d", UserID: "bob", Action: belay.ActionApprove, SelectedOption: "pg",
			Modifications: json.RawMessage(`{"a":1}`), DecidedAt: t0.Add(time.Minute), IdempotencyKey: "k"}
	},
	"TimeoutFired": func(c *belay.Checkpoint) { c.TimeoutFired = true },
	"StartedSession": func(c *belay.Checkpoint) {
		c.StartedSession = &belay.SessionStart{PreviousID: "0190c2a0-0000-7000-8000-000000000009", PreviousStatus: belay.SessionFailed}
	},
	"UpdatedAt":     func(c *belay.Checkpoint) { c.UpdatedAt = t0.Add(time.Hour) },
	"TokenCount":    func(c *belay.Checkpoint) { c.TokenCount = 42 },
	"TokenEncoding": func(c *belay.Checkpoint) { c.TokenEncoding = "cl100k_base" },
	"StateErr": func(c *belay.Checkpoint) {
		c.StateErr = belay.Errorf(belay.CodeCheckpointCorrupt, "a chunk of the state is missing")
	},
}

// covered lists, for every other field, edits that must change the checksum.
var covered = map[string][]func(c *belay.Checkpoint){
	"ID":           {func(c *belay.Checkpoint) { c.ID = "0190c2a0-0000-7000-8000-000000000009" }},
	"SessionID":    {func(c *belay.Checkpoint) { c.SessionID = "0190c2a0-0000-7000-8000-000000000009" }},
	"Seq":          {func(c *belay.Checkpoint) { c.Seq++ }},
	"Name":         {func(c *belay.Checkpoint) { c.Name = "" }},
	"Type":         {func(c *belay.Checkpoint) { c.Type = belay.TypeManual }},
	"Trigger":      {func(c *belay.Checkpoint) { c.Trigger = belay.TriggerPeriodic }},
	"Summary":      {func(c *belay.Checkpoint) { c.Summary += " " }},
	"Description":  {func(c *belay.Checkpoint) { c.Description = "" }},
	"ProjectPath":  {func(c *belay.Checkpoint) { c.ProjectPath += "/" }},
	"WorkspaceRef": {func(c *belay.Checkpoint) { c.WorkspaceRef = "" }},
	"Files": {
		func(c *belay.Checkpoint) { c.Files = nil },
		func(c *belay.Checkpoint) { c.Files.Created = append(c.Files.Created, "d.go") },
		func(c *belay.Checkpoint) { c.Files.Modified = []string{} },
		func(c *belay.Checkpoint) { c.Files.Deleted = nil },
	},
	"AgentState": {
		func(c *belay.Checkpoint) { c.AgentState = nil },
		func(c *belay.Checkpoint) { c.AgentState = json.RawMessage(`{"step":4,"notes":["a"]}`) },
	},
	"Outputs":  {func(c *belay.Checkpoint) { c.Outputs = json.RawMessage(`[2,1]`) }},
	"Metadata": {func(c *belay.Checkpoint) { c.Metadata = json.RawMessage(`{}`) }},
	"Context": {
		func(c *belay.Checkpoint) { c.Context["branch"] = "dev" },
		func(c *belay.Checkpoint) { c.Context["new"] = "" },
		func(c *belay.Checkpoint) { c.Context = nil },
		func(c *belay.Checkpoint) { c.Context = map[string]string{} },
	},
	"Tags": {
		func(c *belay.Checkpoint) { c.Tags = []string{"arch", "db"} },
		func(c *belay.Checkpoint) { c.Tags = nil },
		func(c *belay.Checkpoint) { c.Tags = []string{} },
	},
	"Phase":        {func(c *belay.Checkpoint) { c.Phase = "build" }},
	"Step":         {func(c *belay.Checkpoint) { c.Step = 0 }},
	"ParentID":     {func(c *belay.Checkpoint) { c.ParentID = "" }},
	"HITLRequired": {func(c *belay.Checkpoint) { c.HITLRequired = false }},
	"HITL": {
		func(c *belay.Checkpoint) { c.HITL = nil },
		func(c *belay.Checkpoint) { c.HITL.Title = "Which one?" },
		func(c *belay.Checkpoint) { c.HITL.Message = "" },
		func(c *belay.Checkpoint) { c.HITL.Options[1].Label = "Lite" },
		func(c *belay.Checkpoint) { c.HITL.Options[0].IsDefault = false },
		func(c *belay.Checkpoint) { c.HITL.Options[1].Action = belay.ActionReject },
		func(c *belay.Checkpoint) { c.HITL.Options = c.HITL.Options[:1] },
		func(c *belay.Checkpoint) { c.HITL.Context = json.RawMessage(`{"k":"w"}`) },
		func(c *belay.Checkpoint) { c.HITL.Timeout = nil },
		func(c *belay.Checkpoint) { c.HITL.Timeout.Duration = 60 },
		func(c *belay.Checkpoint) { c.HITL.Timeout.DefaultAction = belay.ActionPause },
		func(c *belay.Checkpoint) { c.HITL.Timeout.ExpiresAt = c.HITL.Timeout.ExpiresAt.Add(1) },
		func(c *belay.Checkpoint) { c.HITL.Approvers = nil },
		func(c *belay.Checkpoint) { c.HITL.ForbidSelfApproval = false },
		func(c *belay.Checkpoint) { c.HITL.OnReject = belay.OnRejectFail },
	},
	"CreatedBy": {func(c *belay.Checkpoint) { c.CreatedBy = "agent-8" }},
	"CreatedAt": {func(c *belay.Checkpoint) { c.CreatedAt = c.CreatedAt.Add(1) }},
	"ExpiresAt": {
		func(c *belay.Checkpoint) { c.ExpiresAt = nil },
		func(c *belay.Checkpoint) { e := c.ExpiresAt.Add(1); c.ExpiresAt = &e },
	},
}

// TestChecksumCoversEveryField fails when Checkpoint gains a field that is
// neither covered by the checksum nor listed as changing after creation.
func TestChecksumCoversEveryField(t *testing.T) {
	typ := reflect.TypeFor[belay.Checkpoint]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		_, isCovered := covered[name]
		_, isUncovered := uncovered[name]
		if isCovered == isUncovered {
			t.Errorf("Checkpoint.%s: say whether the checksum covers it (covered or uncovered in checksum_test.go)", name)
		}
	}
}

func TestChecksumChangesWithContent(t *testing.T) {
	base := mustChecksum(t, checksumFixture())
	for name, edits := range covered {
		for i, edit := range edits {
			c := checksumFixture()
			edit(c)
			if sum := mustChecksum(t, c); sum == base {
				t.Errorf("edit %d of %s left the checksum unchanged", i, name)
			}
		}
	}
}

func TestChecksumIgnoresLaterChanges(t *testing.T) {
	base := mustChecksum(t, checksumFixture())
	c := checksumFixture()
	for name, edit := range uncovered {
		edit(c)
		if sum := mustChecksum(t, c); sum != base {
			t.Errorf("setting %s changed the checksum", name)
		}
	}
}

// TestChecksumCanonical: what does not change a checkpoint's meaning does not
// change its checksum — the time zone or monotonic reading of a time, and
// insignificant whitespace in JSON documents.
func TestChecksumCanonical(t *testing.T) {
	base := mustChecksum(t, checksumFixture())
	zone := time.FixedZone("UTC+2", 2*60*60)
	for _, tc := range []struct {
		name string
		edit func(c *belay.Checkpoint)
	}{
		{"CreatedAtZone", func(c *belay.Checkpoint) { c.CreatedAt = c.CreatedAt.In(zone) }},
		{"CreatedAtMonotonic", func(c *belay.Checkpoint) {
			now := time.Now()
			c.CreatedAt = now.Add(c.CreatedAt.Sub(now))
		}},
		{"ExpiresAtZone", func(c *belay.Checkpoint) { e := c.ExpiresAt.In(zone); c.ExpiresAt = &e }},
		{"HITLTimeoutZone", func(c *belay.Checkpoint) { c.HITL.Timeout.ExpiresAt = c.HITL.Timeout.ExpiresAt.In(zone) }},
		{"AgentStateWhitespace", func(c *belay.Checkpoint) { c.AgentState = json.RawMessage(" {\"step\": 3,\n \"notes\": [ \"a\" ]} ") }},
		{"HITLContextWhitespace", func(c *belay.Checkpoint) { c.HITL.Context = json.RawMessage(`{ "k" : "v" }`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checksumFixture()
			tc.edit(c)
			if sum := mustChecksum(t, c); sum != base {
				t.Errorf("checksum changed to %s, want %s", sum, base)
			}
		})
	}
}

func TestVerifyChecksum(t *testing.T) {
	sealed := func() *belay.Checkpoint {
		c := checksumFixture()
		c.Checksum = mustChecksum(t, c)
		return c
	}
	if err := sealed().VerifyChecksum(); err != nil {
		t.Fatalf("VerifyChecksum of a sealed checkpoint: %v", err)
	}
	decided := sealed()
	uncovered["Decision"](decided)
	uncovered["TimeoutFired"](decided)
	if err := decided.VerifyChecksum(); err != nil {
		t.Errorf("VerifyChecksum after a decision: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(c *belay.Checkpoint)
	}{
		{"ContentChanged", func(c *belay.Checkpoint) { c.Summary = "tampered" }},
		{"StateChanged", func(c *belay.Checkpoint) { c.AgentState = json.RawMessage(`{}`) }},
		{"ChecksumEmpty", func(c *belay.Checkpoint) { c.Checksum = "" }},
		{"ChecksumOtherCase", func(c *belay.Checkpoint) { c.Checksum = "SHA256:" + c.Checksum[len("sha256:"):] }},
		{"StateNotJSON", func(c *belay.Checkpoint) { c.AgentState = json.RawMessage(`{`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sealed()
			tc.edit(c)
			err := c.VerifyChecksum()
			if !belay.IsCode(err, belay.CodeCheckpointCorrupt) {
				t.Fatalf("VerifyChecksum = %v, want %s", err, belay.CodeCheckpointCorrupt)
			}
			e := err.(*belay.Error)
			want := map[string]any{"id": c.ID, "seq": c.Seq, "sessionId": c.SessionID}
			if !reflect.DeepEqual(e.Details, want) {
				t.Errorf("details = %v, want %v", e.Details, want)
			}
		})
	}
}

package belay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"
)

// marshalledChecksum is the checksum as the canonical encoding defines it:
// json.Marshal of every field, the JSON documents included.
func marshalledChecksum(c *Checkpoint) (string, error) {
	f := checksumFields{
		ID: c.ID, SessionID: c.SessionID, Seq: c.Seq, Name: c.Name, Type: c.Type,
		Trigger: c.Trigger, Summary: c.Summary, Description: c.Description,
		ProjectPath: c.ProjectPath, WorkspaceRef: c.WorkspaceRef, Files: c.Files,
		AgentState: c.AgentState, Outputs: c.Outputs, Metadata: c.Metadata,
		Context: c.Context, Tags: c.Tags, Phase: c.Phase, Step: c.Step,
		ParentID: c.ParentID, HITLRequired: c.HITLRequired, HITL: c.HITL,
		CreatedBy: c.CreatedBy, CreatedAt: canonicalTime(c.CreatedAt),
	}
	b, err := json.Marshal(&f)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// TestChecksumSplicesDocumentsAsMarshalWould: hashing the JSON documents
// beside the marshalled fields gives json.Marshal's checksum for documents
// compact or not, with characters Marshal escapes, and strings that look
// like the other fields; documents Marshal refuses fail.
func TestChecksumSplicesDocumentsAsMarshalWould(t *testing.T) {
	docs := []json.RawMessage{
		nil,
		json.RawMessage(`{"a":1,"b":[true,null,"x y"]}`),
		json.RawMessage(` { "a" : [ 1 , 2 ] } `),
		json.RawMessage("{\"s\":\"<b>&amp;</b>\",\"t\":\"\u2028\u2029 ✓\"}"),
		json.RawMessage(`{"q":"\" ,\"agentState\":null,\"outputs\":null,\"metadata\":null, \\\\"}`),
		json.RawMessage(`"just a string"`),
		json.RawMessage(`0`),
		json.RawMessage("[\n1,\t2\r]"),
	}
	for _, state := range docs {
		for _, other := range []json.RawMessage{nil, docs[2]} {
			c := &Checkpoint{ID: "0190c2a0-0000-7000-8000-000000000001", Seq: 2, Summary: `"agentState":null`,
				AgentState: state, Outputs: other, Metadata: state, Tags: []string{"a"},
				Files: &FileChanges{Created: []string{"metadata"}}, CreatedAt: time.Unix(1, 2)}
			got, err := c.ComputeChecksum()
			want, werr := marshalledChecksum(c)
			if err != nil || werr != nil || got != want {
				t.Errorf("state %s, outputs %s: %s, %v; want %s, %v", state, other, got, err, want, werr)
			}
		}
	}
	for _, bad := range []json.RawMessage{{}, json.RawMessage(`{"a": }`), json.RawMessage(`<>`)} {
		c := &Checkpoint{AgentState: bad}
		if sum, err := c.ComputeChecksum(); err == nil {
			t.Errorf("state %q: checksum %s; want an error, as json.Marshal gives", bad, sum)
		}
	}
}

// TestPreparedChecksumTakesTheSessionsFields: a checksum prepared before the
// session's fields are known, summed once they are, is json.Marshal's, also
// when other fields look like the slots the session's fields fill and when
// those fields need escaping.
func TestPreparedChecksumTakesTheSessionsFields(t *testing.T) {
	tricky := `,"sessionId":"","seq":0,"name":,"projectPath":"","workspaceRef":,"parentId":"","hitlRequired":`
	c := &Checkpoint{ID: "0190c2a0-0000-7000-8000-000000000001", Name: tricky, Summary: tricky, Description: tricky,
		WorkspaceRef: tricky, Files: &FileChanges{Modified: []string{tricky}}, AgentState: json.RawMessage(`{"a":1}`),
		Tags: []string{tricky}, Context: map[string]string{"hitlRequired": "", "parentId": "", "projectPath": "", "sessionId": ""},
		Phase: tricky, CreatedBy: tricky, CreatedAt: time.Unix(1, 2),
		HITLRequired: true, HITL: &HITLRequest{Title: tricky, Context: json.RawMessage(`{"parentId":"","hitlRequired":1}`)}}
	p, err := c.PrepareChecksum()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "0190c2a0-0000-7000-8000-000000000002", "/home/a b/<x>&\"\u2028", "\xff\x01", tricky} {
		for _, seq := range []int64{0, 1, 12345678901} {
			c.SessionID, c.Seq, c.ProjectPath, c.ParentID = s, seq, s+"p", "q"+s
			want, err := marshalledChecksum(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Sum(c); got != want {
				t.Errorf("session fields %q, seq %d: %s, want %s", s, seq, got, want)
			}
		}
	}
}

// FuzzAppendJSONString: appendJSONString writes a string as json.Marshal does.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "0190c2a0-0000-7000-8000-000000000002", "/home/alice/project", `a"b`, `a\b`,
		"<&>", "tab\there", "\u2028", "\xff", "é", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got[1:], want)
		}
	})
}

// TestIsCompactJSON: only whitespace outside strings makes a document not
// compact; whitespace and escaped quotes inside strings do not.
func TestIsCompactJSON(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"a":[1,2],"b":"x y"}`: true,
		`"a \" b"`:              true,
		`"\\" `:                 false,
		`{"a": 1}`:              false,
		"[1,\n2]":               false,
		`"<&>"`:                 true,
		``:                      true,
	} {
		if got := IsCompactJSON([]byte(doc)); got != want {
			t.Errorf("IsCompactJSON(%q) = %v, want %v", doc, got, want)
		}
	}
}

// FuzzCompactScan: compactScan, which skips string content with
// bytes.IndexByte, answers as a byte-by-byte reading of the document does.
func FuzzCompactScan(f *testing.F) {
	for _, doc := range []string{`{"a":[1,2],"b":"x y"}`, `"a \" b"`, `"\\" `, `"\\\" "`, `{"a": 1}`, "[1,\n2]",
		`"<&>"`, `"\<"`, "\"\u2028\"", `"open`, `"open \`, `\ "`, ``} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, html := range []bool{false, true} {
			if got, want := compactScan(doc, html), compactScanBytewise(doc, html); got != want {
				t.Errorf("compactScan(%q, html %v) = %v, want %v", doc, html, got, want)
			}
		}
	})
}

func compactScanBytewise(doc []byte, html bool) bool {
	inString, escaped := false, false
	for _, c := range doc {
		switch {
		case html && (c == '<' || c == '>' || c == '&' || c == 0xE2):
			return false
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

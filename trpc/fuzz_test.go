package trpc

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/belayhq/belay"
)

// FuzzDecodeInputs: any bytes a client sends as a procedure's input, plain
// or superjson, either decode or give a VALIDATION_ERROR naming a field —
// never a panic or an uncoded error.
func FuzzDecodeInputs(f *testing.F) {
	for _, seed := range []string{`null`, `"01890000-0000-7000-8000-000000000000"`, `{"taskId":"x","limit":1000}`,
		`{"json":{"createdAfter":"2025-01-15T11:00:00Z"},"meta":{"values":{"createdAfter":["Date"]}}}`,
		`{"taskId":"01890000-0000-7000-8000-000000000000","type":"hitl","hitl":{"required":true,"options":[{}]}}`,
		`{"checkpointId":1}`, `[1,2]`, `{"a":`, `{"cursor":null,"limit":-1}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, tr := range []transformer{plain{}, superJSON{}} {
			in, err := tr.input(raw)
			if err != nil {
				continue
			}
			for _, dst := range []any{&listInput{}, &createInput{}, &decideInput{}, &restoreInput{}, &eventsInput{}, &sessionsInput{}} {
				if err := decodeInput(in, dst); err != nil {
					var be *belay.Error
					if !errors.As(err, &be) || be.Code != belay.CodeValidation || be.Details["field"] == nil {
						t.Fatalf("decode %T of %q: %v", dst, raw, err)
					}
				}
			}
			if _, err := uuidInput(in); err != nil && !belay.IsCode(err, belay.CodeValidation) {
				t.Fatalf("uuid of %q: %v", raw, err)
			}
		}
		if json.Valid(raw) {
			if _, err := (superJSON{}).output(json.RawMessage(raw)); err != nil {
				t.Fatalf("superjson output of valid JSON %q: %v", raw, err)
			}
		}
	})
}

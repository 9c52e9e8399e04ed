package core

import (
	"slices"
	"strings"

	"github.com/belayhq/belay"
)

// EventTypes lists every event type: what a webhook can subscribe to and an
// event stream can filter on.
var EventTypes = []string{
	belay.EventSessionCreated, belay.EventSessionStatusChanged,
	belay.EventCheckpointCreated, belay.EventCheckpointDeleted,
	belay.EventHITLRequired, belay.EventHITLDecided, belay.EventHITLTimedOut,
	belay.EventWorkspaceRestored, belay.EventSessionDeleted, belay.EventCheckpointRepaired,
}

// checkEventTypes returns types without repeats, in their first order, or a
// VALIDATION_ERROR on field naming the first unknown type and listing the
// known ones (details.allowed). No types means all.
func checkEventTypes(field string, types []string) ([]string, error) {
	var out []string
	for _, t := range types {
		if !slices.Contains(EventTypes, t) {
			return nil, belay.Invalid(field, "unknown event type %q; known: %s", clipText(t, 100), strings.Join(EventTypes, ", ")).
				With("allowed", EventTypes)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

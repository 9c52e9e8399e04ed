// Package benchutil holds what the programs under bench/ share.
package benchutil

import (
	"encoding/json"
	"fmt"
	"time"
)

// State returns a JSON object of about size bytes, shaped like agent state.
func State(size int) json.RawMessage {
	m := map[string]any{"phase": "implementation", "step": 4, "messages": []string{}}
	msgs := []string{}
	for b, _ := json.Marshal(m); len(b) < size; b, _ = json.Marshal(m) {
		msgs = append(msgs, fmt.Sprintf("message %d: the agent edited internal/service/service.go", len(msgs)))
		m["messages"] = msgs
	}
	b, _ := json.Marshal(m)
	return b
}

// Percentile is the p-th percentile of sorted latencies, to the microsecond.
func Percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)-1)*p/100].Round(time.Microsecond)
}

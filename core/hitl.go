package core

import (
	"time"

	"github.com/belayhq/belay"
)

// defaultOptions are offered when a HITL request names none.
var defaultOptions = []belay.HITLOption{
	{ID: "approve", Label: "Approve", Action: belay.ActionApprove, IsDefault: true},
	{ID: "reject", Label: "Reject", Action: belay.ActionReject},
}

// buildHITL turns a validated request into the stored HITL configuration.
func buildHITL(in *belay.HITLInput, cp *belay.Checkpoint, now time.Time) *belay.HITLRequest {
	h := &belay.HITLRequest{
		Title: in.Title, Message: in.Message, Options: in.Options, Context: compactJSON(in.Context),
		Approvers: in.Approvers, ForbidSelfApproval: in.ForbidSelfApproval, OnReject: in.OnReject,
	}
	if h.Title == "" {
		h.Title = cp.Summary
	}
	if len(h.Options) == 0 {
		h.Options = append([]belay.HITLOption(nil), defaultOptions...)
	}
	if h.OnReject == "" {
		h.OnReject = belay.OnRejectFail
	}
	if t := in.Timeout; t != nil {
		h.Timeout = &belay.HITLTimeout{Duration: t.Duration, DefaultAction: t.DefaultAction,
			ExpiresAt: now.Add(time.Duration(t.Duration) * time.Second)}
	}
	return h
}

func hitlEventData(cp *belay.Checkpoint) map[string]any {
	d := map[string]any{"checkpointId": cp.ID, "title": cp.HITL.Title, "message": cp.HITL.Message, "options": cp.HITL.Options}
	if cp.HITL.Timeout != nil {
		d["expiresAt"] = cp.HITL.Timeout.ExpiresAt
		d["defaultAction"] = cp.HITL.Timeout.DefaultAction
	}
	return d
}

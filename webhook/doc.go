// Package webhook delivers belay's events to webhooks as signed HTTP POSTs,
// and lets a receiver check what it gets.
//
// A receiver needs only the header names and VerifySignature: this package
// imports nothing of belay's but the root package's types.
//
// Every event of a webhook's types is POSTed to its URL, one at a time in
// event order, with these headers:
//
//	Content-Type:      application/json (the body is the belay.Event)
//	X-Belay-Event:     the event type, e.g. checkpoint.created
//	X-Belay-Delivery:  the id of this attempt in the delivery log
//	X-Belay-Timestamp: unix seconds when the attempt was signed
//	X-Belay-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>
//
// A receiver verifies a request by computing the HMAC over the timestamp
// header, a dot and the raw body with the webhook's secret, comparing it to
// the signature in constant time (VerifySignature does both), and rejecting
// timestamps more than a few minutes old to stop replays.
//
// Delivery is at least once: a process that stops between a delivery and
// recording it, or several `belay serve` processes on one database each
// running a dispatcher, can deliver an event twice. The event's seq (in the
// body) is global and stable: receivers drop duplicates by it.
//
// The dispatcher (Run) reads the event log like any other subscriber,
// through a Source, and keeps nothing of its own: the webhooks' positions
// and the delivery log stay with the Source, so a restart resumes where the
// last run stopped.
package webhook

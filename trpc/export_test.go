package trpc

// The bounds of a batch, for the tests.
const (
	MaxBatchCalls    = maxBatchCalls
	BatchConcurrency = batchConcurrency
	BatchBytes       = batchBytes
)

// The bounds of a WebSocket connection, for the tests.
const (
	WSCallsInFlight = wsCallsInFlight
	WSSubscriptions = wsSubscriptions
)

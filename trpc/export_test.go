package trpc

// The bounds of a batch, for the tests.
const (
	MaxBatchCalls    = maxBatchCalls
	BatchConcurrency = batchConcurrency
	BatchBytes       = batchBytes
)

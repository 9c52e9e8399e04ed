package belay

import "context"

// Progress is how far a long operation (a snapshot, a rollback, an export,
// an import, a validation) has got.
type Progress struct {
	// Phase says what is being done, e.g. "hashing files".
	Phase string
	// Done of Total items (files, checkpoints); Total is 0 when unknown.
	Done, Total int64
	// Bytes of TotalBytes processed; TotalBytes is 0 when unknown.
	Bytes, TotalBytes int64
}

type progressKey struct{}

// WithProgress returns a copy of ctx under which a service working in this
// process reports the progress of long operations to fn, from the goroutine
// doing the work; fn must return quickly. A service behind a server has no
// way to and does not call it.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ProgressFunc returns the function WithProgress put in ctx, or nil.
func ProgressFunc(ctx context.Context) func(Progress) {
	fn, _ := ctx.Value(progressKey{}).(func(Progress))
	return fn
}

// ReportProgress passes p to the function WithProgress put in ctx, if any.
func ReportProgress(ctx context.Context, p Progress) {
	if fn := ProgressFunc(ctx); fn != nil {
		fn(p)
	}
}

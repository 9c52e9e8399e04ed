package cli

import "time"

// SetProgressDelay sets how long an operation runs before its progress
// shows, for tests; it returns a function that puts the delay back.
func SetProgressDelay(d time.Duration) func() {
	old := progressDelay
	progressDelay = d
	return func() { progressDelay = old }
}

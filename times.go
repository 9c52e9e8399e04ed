package belay

import "time"

// belay stores instants as nanoseconds since 1970 in a signed 64-bit
// integer, which holds the years 1678 to 2261 whole; durations are
// nanoseconds too, at most 292 years. Inputs outside are refused before a
// conversion could wrap them around.
var (
	// MinTime and MaxTime bound the instants belay takes as input.
	MinTime = time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(2261, 12, 31, 23, 59, 59, 0, time.UTC)
)

// MaxSeconds bounds a duration given in seconds: 100 years.
const MaxSeconds = 100 * 365 * 24 * 60 * 60

// ValidateTime refuses an instant outside MinTime and MaxTime, naming field.
func ValidateTime(field string, t *time.Time) error {
	if t != nil && (t.Before(MinTime) || t.After(MaxTime)) {
		return Invalid(field, "%s must be between %s and %s, got %s", field,
			MinTime.Format(time.DateOnly), MaxTime.Format(time.DateOnly), t.Format(time.RFC3339))
	}
	return nil
}

// Seconds turns n seconds, given as field, into a duration: VALIDATION_ERROR
// when n is negative or more than MaxSeconds.
func Seconds(field string, n int64) (time.Duration, error) {
	if n < 0 || n > MaxSeconds {
		return 0, Invalid(field, "%s must be between 0 and %d (100 years), got %d", field, MaxSeconds, n)
	}
	return time.Duration(n) * time.Second, nil
}

package planner

import (
	"strings"
	"time"
)

// formatDuration writes a duration the way users write them in
// configuration: "2m" rather than Go's "2m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// roundForHumans drops sub-second noise from relative times.
func roundForHumans(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

//go:build !linux

package executor

import "time"

func newRealTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

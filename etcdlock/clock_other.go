//go:build !linux

package etcdlock

import "time"

// clockSource names the clock of instant.
func clockSource() string { return "monotonic" }

var monoStart = time.Now()

// readClock reads Go's monotonic clock (see instant).
func readClock() int64 { return int64(time.Since(monoStart)) }

//go:build linux

package etcdlock

import (
	"time"

	"golang.org/x/sys/unix"
)

// clockSource names the clock of instant.
var clockSource = "CLOCK_BOOTTIME"

var monoStart = time.Now()

func init() {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil { // kernels before 2.6.39
		clockSource = "monotonic"
	}
}

// readClock reads CLOCK_BOOTTIME, which counts the time the machine was
// suspended (or, without it, Go's monotonic clock from the first reading).
func readClock() int64 {
	if clockSource != "CLOCK_BOOTTIME" {
		return int64(time.Since(monoStart))
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return ts.Nano()
}

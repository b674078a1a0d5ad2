//go:build linux

package etcdlock

import (
	"time"

	"golang.org/x/sys/unix"
)

// clockSource names the clock of instant.
func clockSource() string {
	if boottime {
		return "CLOCK_BOOTTIME"
	}
	return "monotonic"
}

var monoStart = time.Now()

// boottime is set when CLOCK_BOOTTIME can be read (kernels since 2.6.39).
var boottime bool

func init() {
	var ts unix.Timespec
	boottime = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) == nil
}

// readClock reads CLOCK_BOOTTIME, which counts the time the machine was
// suspended (or, without it, Go's monotonic clock from the first reading).
func readClock() int64 {
	if !boottime {
		return int64(time.Since(monoStart))
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return ts.Nano()
}

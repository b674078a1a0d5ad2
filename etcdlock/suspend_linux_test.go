package etcdlock_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fencelock/fencelock/etcdlock"
)

// TestClockCountsSuspend checks that production builds measure deadlines
// on CLOCK_BOOTTIME on Linux, the clock that counts a suspend. (Elsewhere
// they use Go's monotonic clock; clock_other.go.)
func TestClockCountsSuspend(t *testing.T) {
	src, got := etcdlock.ClockSourceForTest()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	if src != "CLOCK_BOOTTIME" || time.Duration(ts.Nano()-got).Abs() > 50*time.Millisecond {
		t.Fatalf("clock %s read %d, CLOCK_BOOTTIME %d: want CLOCK_BOOTTIME", src, got, ts.Nano())
	}
}

package etcdlock

import (
	"sync/atomic"
	"time"
)

// instant is a reading, in nanoseconds, of the clock on which validity
// deadlines are measured ([Lock.ValidUntil]): one that counts the time
// the machine was suspended, where the platform has one. Go's monotonic
// clock does not count it on Linux (CLOCK_MONOTONIC stops while the
// machine sleeps), so after a resume a deadline measured on it would
// still lie ahead although etcd expired the lease during the suspend, and
// Done would stay open; on this clock the deadline is seen passed at the
// first look after the resume (see session.keepAlive). The clock is
// CLOCK_BOOTTIME on Linux (clock_linux.go) and Go's monotonic clock
// elsewhere (clock_other.go), which on some platforms does not count a
// suspend either: there Done closes after a resume only once a keepalive
// is refused.
type instant int64

// clockJump is added to every reading: the tests make the clock jump as a
// resume does (see export_test.go).
var clockJump atomic.Int64

// now reads the clock.
func now() instant { return instant(readClock() + clockJump.Load()) }

func (i instant) add(d time.Duration) instant { return i + instant(d) }
func (i instant) sub(j instant) time.Duration { return time.Duration(i - j) }
func (i instant) before(j instant) bool       { return i < j }

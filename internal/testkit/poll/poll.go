// Package poll is the one way the module's tests wait for a condition that
// comes true on its own (a watch set up, a metric recorded, a backend gone):
// [Until] checks it every few milliseconds and fails the test if it has not
// come true within [Timeout]. A wait that gives up silently would let the
// assertions after it pass or fail for the wrong reason.
package poll

import (
	"testing"
	"time"
)

// Timeout bounds every [Until]: long enough for a loaded 2-core machine,
// short enough that a condition that never comes true fails the test soon.
const Timeout = 10 * time.Second

// interval is the pause between two checks.
const interval = 5 * time.Millisecond

// Until calls cond until it returns true, and fails tb (Fatalf, naming what
// it waited for) if it has not within [Timeout]. cond runs on the calling
// goroutine, so it may call tb's methods; Until must be called from the
// test's goroutine, as Fatalf requires.
func Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	until(tb, what, cond, Timeout)
}

// until is Until with a timeout of its own (the package's test gives up
// after milliseconds, not Timeout's 10 s).
func until(tb testing.TB, what string, cond func() bool, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waiting for %s: not so after %v", what, timeout)
		}
		time.Sleep(interval)
	}
}

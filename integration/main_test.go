package integration

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the package's tests leave no goroutine running:
// every worker process is waited for, and every client and server the
// tests start in this process is closed. (The worker processes run from
// init, before TestMain: see workerMain.)
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

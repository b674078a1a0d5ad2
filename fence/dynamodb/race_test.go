//go:build race

package dynamofence_test

// raceEnabled: this test binary has the race detector (norace_test.go).
const raceEnabled = true

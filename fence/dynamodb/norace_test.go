//go:build !race

package dynamofence_test

// raceEnabled: this test binary has the race detector (race_test.go).
const raceEnabled = false

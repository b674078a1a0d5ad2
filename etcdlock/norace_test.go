//go:build !race

package etcdlock_test

const raceEnabled = false

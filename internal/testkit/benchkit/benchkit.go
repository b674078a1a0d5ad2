// Package benchkit holds what the adapters' benchmarks share: running a
// fenced write and its plain twin in turns, so that load from other
// processes on a shared machine falls on both alike.
package benchkit

import (
	"testing"
	"time"
)

// Interleave runs fns in turn in each of b's iterations, starting each
// iteration from the next one, and returns the time each took in all. It
// fails b on the first error.
func Interleave(b *testing.B, fns ...func() error) []time.Duration {
	b.Helper()
	total := make([]time.Duration, len(fns))
	for i := 0; b.Loop(); i++ {
		for j := range fns {
			k := (i + j) % len(fns)
			start := time.Now()
			err := fns[k]()
			total[k] += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	return total
}

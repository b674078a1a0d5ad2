package fence_test

import (
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// BenchmarkMemoryUpdate is a MemoryStore's Update of one key (a 1 KiB
// value) by its holder, the loop's own cost with no I/O around it.
func BenchmarkMemoryUpdate(b *testing.B) {
	s := fence.NewMemoryStore()
	v := make([]byte, 1024)
	fn := func(fence.Record) ([]byte, error) { return v, nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Update(b.Context(), "k", 1, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryUpdateAll is a MemoryStore's UpdateAll of two keys.
func BenchmarkMemoryUpdateAll(b *testing.B) {
	s := fence.NewMemoryStore()
	v := make([]byte, 1024)
	claims := []fence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}}
	fn := func(map[string]fence.Record) (map[string][]byte, error) {
		return map[string][]byte{"a": v, "b": v}, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.UpdateAll(b.Context(), claims, fn); err != nil {
			b.Fatal(err)
		}
	}
}

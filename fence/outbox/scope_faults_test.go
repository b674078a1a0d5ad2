package outbox_test

import (
	"fmt"
	"testing"

	"github.com/fencelock/fencelock/fence/outbox"
)

// TestScopeHugePartitions: a scope of more partitions than a uint32
// holds passes Validate, so PartitionOf and Has must not panic on it (they
// divided by uint32(partitions), zero for 1<<32), and they agree with the
// SQL stores' "hash % partitions" on 64-bit integers.
func TestScopeHugePartitions(t *testing.T) {
	for _, partitions := range []int{1 << 32, 1<<33 + 1, 3} {
		t.Run(fmt.Sprint(partitions), func(t *testing.T) {
			s := outbox.Scope{Index: 1, Partitions: partitions}
			if err := s.Validate(); err != nil {
				t.Fatalf("Validate: got %v, want nil", err)
			}
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panicked: %v", p)
				}
			}()
			for _, res := range []string{"acct-1", "acct-2", ""} {
				want := int(uint64(outbox.Hash(res)) % uint64(partitions))
				if got := outbox.PartitionOf(res, partitions); got != want {
					t.Errorf("PartitionOf(%q, %d): got %d, want %d (hash %% partitions)", res, partitions, got, want)
				}
				if got := s.Has(res); got != (want == 1) {
					t.Errorf("Has(%q): got %v, want %v", res, got, want == 1)
				}
			}
		})
	}
}

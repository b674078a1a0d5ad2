package fence_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStoreConformance(t *testing.T) {
	fencetest.Run(t, func(*testing.T) fence.Store { return fence.NewMemoryStore() })
}

func TestZeroMemoryStore(t *testing.T) {
	var s fence.MemoryStore
	if err := s.Put(t.Context(), "k", 1, []byte("v")); err != nil {
		t.Fatalf("Put on zero MemoryStore: got %v, want nil", err)
	}
}

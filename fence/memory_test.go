package fence_test

import (
	"os"
	"os/exec"
	"strings"
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

// TestConformanceSuiteCatchesUnfencedStore is the suite's own control: run
// against a store that ignores tokens, it must fail. The test re-runs itself
// in a child process, where it plays the broken adapter.
func TestConformanceSuiteCatchesUnfencedStore(t *testing.T) {
	if os.Getenv("FENCETEST_CONTROL_CHILD") == "1" {
		fencetest.Run(t, func(*testing.T) fence.Store { return &lastWriterWins{} })
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceSuiteCatchesUnfencedStore$", "-test.v")
	cmd.Env = append(os.Environ(), "FENCETEST_CONTROL_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("fencetest passed a store without fencing:\n%s", out)
	}
	for _, sub := range []string{"StaleRefusedAndNothingChanged", "HigherTokenBecomesFloor", "ConcurrentWriters"} {
		if !strings.Contains(string(out), "--- FAIL: TestConformanceSuiteCatchesUnfencedStore/"+sub) {
			t.Errorf("subtest %s did not fail against the unfenced store:\n%s", sub, out)
		}
	}
}

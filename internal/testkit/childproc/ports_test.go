package childproc

import "testing"

// TestFreePortsNeverRepeat: a cluster's members each ask for their ports in
// turn, with the earlier ports already closed again. CI once started three
// members with two on one peer port ("initial cluster ... has duplicate
// url"). Ports handed out one call at a time must still all differ.
func TestFreePortsNeverRepeat(t *testing.T) {
	seen := make(map[int]int)
	for i := range 1000 {
		ports, err := FreePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if j, ok := seen[p]; ok {
				t.Fatalf("call %d returned port %d, which call %d returned already", i, p, j)
			}
			seen[p] = i
		}
	}
}

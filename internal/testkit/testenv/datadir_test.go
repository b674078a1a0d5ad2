//go:build linux

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSweepRemovesDeadProcessesDirs: a directory MkdirTemp made for a
// process that is gone is removed; one of a live process, of this one,
// and anything else, stay.
func TestSweepRemovesDeadProcessesDirs(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$") // this test binary, running nothing
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	dir := t.TempDir()
	names := map[string]bool{ // name -> stays
		fmt.Sprintf("fencelock-pgtest-%d-123", dead):        false,
		fmt.Sprintf("fencelock-pgtest-%d-123", os.Getpid()): true,
		"fencelock-pgtest-1-123":                            true, // init
		"fencelock-other":                                   true,
		fmt.Sprintf("other-pgtest-%d-123", dead):            true,
	}
	for n := range names {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweep(dir)
	for n, stays := range names {
		_, err := os.Stat(filepath.Join(dir, n))
		if got := err == nil; got != stays {
			t.Errorf("%s: there after the sweep: %v, want %v", n, got, stays)
		}
	}
}

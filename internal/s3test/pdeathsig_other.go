//go:build !linux

package s3test

import "os/exec"

// setParentDeathSignal is Linux-only; elsewhere a test binary that dies
// without running its cleanups leaves the server running.
func setParentDeathSignal(*exec.Cmd) {}

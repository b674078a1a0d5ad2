//go:build !linux

package childproc

import "os/exec"

// setParentDeathSignal is Linux-only; elsewhere a child whose parent dies
// uncleanly lives on until its stdin closes or it is killed by hand.
func setParentDeathSignal(*exec.Cmd) {}

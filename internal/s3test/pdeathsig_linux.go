package s3test

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the server if the test binary
// dies without running its cleanups (a panic, a timeout's SIGQUIT).
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

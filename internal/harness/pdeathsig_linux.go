package harness

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills a worker when the harness dies, so that no
// worker outlives a crashed run.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

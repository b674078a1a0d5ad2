package childproc

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the child when its parent dies
// without cleaning up (a panic, a test timeout's SIGQUIT, SIGKILL). A
// SysProcAttr the caller set is kept.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
}
